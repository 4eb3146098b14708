"""int16 (16x8) and uint8 TRANSPOSE_CONV (issue 28) on the NPU beside Vela 5.2 ``--optimise
Size``, on one accelerator: a stride-2 layer of each form (the uint8 ones with and without a
bias, and with a kernel row below the stride), both streams run on the functional model
(emulated): NPU operations, commands, flash, DMA and arena bytes touched, and whether the
outputs equal the oracle (TFLite Micro for int16, LiteRT's reference kernels for uint8, which
TFLite Micro has no kernel of) on one seeded random input; "compile s" is each compiler's
wall time on this host.

  PYTHONPATH=. python benchmarks/transpose_conv16_uint8.py [--accelerator ethos-u55-128]
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

from transpose_conv_models import transpose_conv  # noqa: E402

from benchmarks.stream_compare import stream_table, tvm_ethos_stream, vela_stream  # noqa: E402
from tests.helpers.tflite_oracle import oracle, tflm_oracle  # noqa: E402

SHAPE = (1, 24, 20, 16)
_UINT8_Q = dict(in_q=(0.05, 131), out_q=(0.2, 119), w_zp=77)
#: name -> (type, the model builder's arguments)
FORMS = {
    "int16_k3": ("int16", dict(bias="int64", bias_range=1 << 30)),
    "int16_k3_nobias": ("int16", dict(bias=None)),
    "uint8_k3": ("uint8", dict(_UINT8_Q, bias="int32")),
    "uint8_k3_nobias": ("uint8", dict(_UINT8_Q, bias=None)),
    "uint8_k1x2": ("uint8", dict(_UINT8_Q, bias="int32", kernel=(1, 2))),
}


def rows(accelerator: str) -> list:
    out = []
    rs = np.random.RandomState(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (dtype, kw) in FORMS.items():
            data = transpose_conv(dtype, np.random.RandomState(3), shape=SHAPE, cout=16, **kw)
            path = os.path.join(tmp, f"tconv_{name}.tflite")
            Path(path).write_bytes(data)
            info = np.iinfo(dtype)
            xs = [rs.randint(info.min, info.max + 1, SHAPE).astype(dtype)]
            case = (xs, (tflm_oracle if dtype == "int16" else oracle)(data, xs))
            out.append(vela_stream(path, accelerator, "Size", case))
            out.append(tvm_ethos_stream(path, accelerator, case))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accelerator", default="ethos-u55-128")
    print(stream_table(rows(ap.parse_args().accelerator)))


if __name__ == "__main__":
    main()
