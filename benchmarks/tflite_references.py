"""Where LiteRT's reference kernels and TFLite Micro disagree on a model (rfcs/0002, section 4,
"Two references").

    python benchmarks/tflite_references.py [--model resnet8_cifar] [--seeds 60] [--per-seed 20]

Both interpreters keep every tensor (LiteRT's ``experimental_preserve_all_tensors``, TFLite
Micro's ``kPreserveAllTensors``); for each input whose outputs differ, the first operator whose
output differs is found. Inputs: uniform, gaussian (sigma 40), smooth (a random walk along
rows) and constant int8 images, ``--per-seed`` of each kind per seed (constant: a fifth of the
seeds). Prints one row per (input kind, operator) with how many inputs and elements differ.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

KINDS = {
    "uniform": lambda rs, shape: rs.randint(-128, 128, shape),
    "gaussian": lambda rs, shape: np.clip(np.round(rs.randn(*shape) * 40), -128, 127),
    "smooth": lambda rs, shape: np.clip(np.round(np.cumsum(rs.randn(*shape) * 8, axis=2)),
                                        -128, 127),
    "constant": lambda rs, shape: np.full(shape, rs.randint(-128, 128)),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet8_cifar")
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--per-seed", type=int, default=20)
    a = ap.parse_args(argv)

    import tflite
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tflite_micro.python.tflite_micro import runtime

    from tests.helpers.models import MODELS_DIR

    data = (MODELS_DIR / f"{a.model}.tflite").read_bytes()
    model = tflite.Model.GetRootAs(data, 0)
    sg = model.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    ops = []
    for o in range(sg.OperatorsLength()):
        op = sg.Operators(o)
        code = model.OperatorCodes(op.OpcodeIndex())
        ops.append((o, names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())],
                    int(op.OutputsAsNumpy()[0])))
    lr = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    lr.allocate_tensors()
    tm = runtime.Interpreter.from_bytes(
        data, intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
    inp, out = lr.get_input_details()[0], lr.get_output_details()[0]
    t0, total, rows, outputs = time.perf_counter(), Counter(), Counter(), Counter()
    for kind, make in KINDS.items():
        for seed in range(a.seeds if kind != "constant" else max(a.seeds // 5, 1)):
            rs = np.random.RandomState(seed)
            for _ in range(a.per_seed):
                x = make(rs, tuple(inp["shape"])).astype(inp["dtype"])
                lr.set_tensor(inp["index"], x)
                lr.invoke()
                tm.set_input(x, 0)
                tm.invoke()
                total[kind] += 1
                got, want = lr.get_tensor(out["index"]), tm.get_output(0)
                if np.array_equal(got, want):
                    continue
                outputs[kind] += int((got != want).sum())
                for o, name, t in ops:
                    x1 = lr.get_tensor(t).ravel().astype(np.int64)
                    x2 = np.asarray(tm.GetTensor(t, 0)["tensor_data"]).ravel().astype(np.int64)
                    if not np.array_equal(x1, x2):
                        rows[(kind, o, name, int((x1 != x2).sum()),
                              int(np.abs(x1 - x2).max()))] += 1
                        break
    print(f"{a.model}: {sum(total.values())} inputs in {time.perf_counter() - t0:.0f} s")
    print(f"{'inputs':<10} {'n':>6} {'differ':>7} {'outputs':>8}")
    for kind in KINDS:
        n = sum(v for k, v in rows.items() if k[0] == kind)
        print(f"{kind:<10} {total[kind]:>6} {n:>7} {outputs[kind]:>8}")
    print(f"\n{'inputs':<10} {'first differing operator':<28} {'elements':>8} {'by':>3} "
          f"{'inputs':>7}")
    for (kind, o, name, n, by), count in sorted(rows.items()):
        print(f"{kind:<10} {f'{o} ({name})':<28} {n:>8} {by:>3} {count:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
