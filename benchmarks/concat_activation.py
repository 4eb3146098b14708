"""CONCATENATION with a fused RELU, RELU6 or RELU_N1_TO_1 (issue 28) on the NPU beside Vela
5.2 ``--optimise Size``, on one accelerator: for each activation, inputs quantized as the
output and a requantizing form, both streams run on the functional model (emulated): NPU
operations, commands, flash and arena bytes touched, and whether the outputs equal the oracle
(tests/tvm_ethos/concat_activation_models.py: TFLite Micro and LiteRT refuse the fused model,
so the activation operator run on the concatenation's codes) on one seeded random input;
"compile s" is each compiler's wall time on this host.

  PYTHONPATH=. python benchmarks/concat_activation.py [--accelerator ethos-u55-128]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "tests" / "tvm_ethos"))

from concat_activation_models import ACTIVATIONS, activation_oracle, fused_concat  # noqa: E402

from benchmarks.stream_compare import stream_table, tvm_ethos_stream, vela_stream  # noqa: E402
from tvm_ethos.compute import concat_requant  # noqa: E402

SHAPES = ((1, 8, 8, 16), (1, 8, 8, 8))
#: name -> (input quantizations, output quantization)
FORMS = {
    "alike": (((0.05, 3), (0.05, 3)), (0.05, 3)),
    "requantizing": (((0.05, 3), (0.0731, -9)), (0.0917, -5)),
}


def _codes(xs, qs, out_q) -> np.ndarray:
    """The concatenation's output codes: each input's, rescaled as LiteRT does where it is
    quantized unlike the output (``compute.concat_requant``)."""
    parts = [x.astype(np.int64) if tuple(q) == tuple(out_q) else
             concat_requant.litert_codes("int8", q, out_q)[x.astype(np.int64) + 128]
             for x, q in zip(xs, qs)]
    return np.concatenate(parts, 3).astype(np.int8)


def rows(accelerator: str) -> list:
    out = []
    rs = np.random.RandomState(0)
    with tempfile.TemporaryDirectory() as tmp:
        for act in ACTIVATIONS:
            for form, (qs, out_q) in FORMS.items():
                path = os.path.join(tmp, f"concat_{act}_{form}.tflite")
                Path(path).write_bytes(fused_concat(SHAPES, 3, qs, out_q, act))
                xs = [rs.randint(-128, 128, size=s).astype(np.int8) for s in SHAPES]
                case = (xs, [activation_oracle(_codes(xs, qs, out_q), out_q, act)])
                out.append(vela_stream(path, accelerator, "Size", case))
                out.append(tvm_ethos_stream(path, accelerator, case))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accelerator", default="ethos-u55-128")
    print(stream_table(rows(ap.parse_args().accelerator)))


if __name__ == "__main__":
    main()
