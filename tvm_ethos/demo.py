"""``make demo``: the TVM path end to end, through the two commands a user types.

  python -m tvm_ethos.demo MODEL.tflite [--target ethos-n,opencl] [--out out/demo] [--seed 0]

``make demo`` runs it on ResNet-8 (CIFAR-10) for ``ethos-n,opencl``: its convolutions go to the
Ethos-N (emulated) and its fully connected layer (per-channel weights, which Ethos-N refuses)
and softmax fall back to OpenCL, so the package has a real NPU -> GPU edge. Its output follows
its input, so the exactness check below can fail; a model whose reference output is the same
for two different inputs (mobilenet_v1_0.25_96's random weights) is refused up front, since
no check on it could fail.

1. ``tvmc compile MODEL --target T -o OUT/model.tar --planner-report OUT/plan.json``: prints
   the partition summary and the per-layer plan report;
2. a fixed-seed random input, saved to ``OUT/input.npz`` under the model's input names;
3. ``tvmc run OUT/model.tar --inputs OUT/input.npz --print-top 5 --print-edges --outputs
   OUT/output.npz``: the zero-copy edge report and the top-5 classes (NPU part emulated);
4. the same input through the TFLite interpreter (ai-edge-litert, reference kernels: the
   integer arithmetic the emulator reproduces) and ``np.array_equal`` on every output;
5. the Ethos-U file for TFLite Micro: ``tvmc compile MODEL --target ethos-u -o
   OUT/model_ethos_u.tflite --output-format tflite`` (the model as one ``ethos-u`` custom
   operator holding tvm-ethos's generated command stream, Vela's layout; the tflite-micro
   host would keep any operator the NPU does not take as a TFLite operator), read back and run
   on the functional Ethos-U model (``ethosu_stream``: emulated, no board here), checked
   against the interpreter the same way. ``--no-ethos-u`` skips it.

``make demo`` then runs person detection (``tvm_ethos.demo_person``).

Exit status 0 only when every output is bit-exact with the interpreter's; 1 when one is not,
or when the model's output does not depend on its input; 2 on bad input (as tvmc).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ethos_arch.accelerators import DEFAULT_ACCELERATOR
from ethosu_stream.run import operation_count
from ethosu_stream.tflite_graph import run_vela_model
from tvm_ethos import cli
from tvm_ethos.cli_run import fill


def tflite_reference(model: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of TFLite's reference kernels (``OpResolverType.BUILTIN_REF``); the
    default resolver's XNNPack kernels requantize in float and may differ by 1 LSB."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=model,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def random_inputs(model: str, seed: int) -> dict[str, np.ndarray]:
    """One fixed-seed input per model input, over the full range of its integer type."""
    from ai_edge_litert.interpreter import Interpreter

    rs = np.random.RandomState(seed)
    details = Interpreter(model_path=model).get_input_details()
    return {d["name"]: fill(d["shape"], d["dtype"], "random", rs) for d in details}


def compare(got: list[np.ndarray], ref: list[np.ndarray]) -> list[str]:
    """One line per output: equal, or how many values differ and by how much."""
    lines = []
    if len(got) != len(ref):
        return [f"{len(got)} outputs, the interpreter gives {len(ref)}"]
    for i, (g, r) in enumerate(zip(got, ref)):
        g = g.reshape(r.shape) if g.size == r.size else g
        if np.array_equal(g, r):
            lines.append(f"output {i}: bit-exact: yes ({r.size} values)")
        elif g.shape != r.shape:
            lines.append(f"output {i}: bit-exact: no (shape {g.shape}, interpreter {r.shape})")
        else:
            diff = np.abs(g.astype(np.int64) - r.astype(np.int64))
            lines.append(f"output {i}: bit-exact: no ({int((diff > 0).sum())} of {r.size} "
                         f"values differ, by up to {int(diff.max())})")
    return lines


def output_follows_input(model: str, seed: int) -> bool:
    """Whether the interpreter's outputs differ for the inputs of ``seed`` and ``seed + 1``:
    if not, an exactness check on this model cannot tell a right answer from a wrong one."""
    a = tflite_reference(model, list(random_inputs(model, seed).values()))
    b = tflite_reference(model, list(random_inputs(model, seed + 1).values()))
    return any(not np.array_equal(x, y) for x, y in zip(a, b))


def check_outputs(
    model: str, inputs: dict[str, np.ndarray], out_path: str
) -> tuple[bool, list[str]]:
    """``tvmc run``'s outputs (``out_path``, an .npz of output_0, output_1, ...) against the
    interpreter on the same inputs: (all bit-exact, one line per output)."""
    with np.load(out_path) as f:
        got = [f[k] for k in sorted(f.files, key=lambda k: int(k.rsplit("_", 1)[1]))]
    lines = compare(got, tflite_reference(model, list(inputs.values())))
    return all("bit-exact: yes" in line for line in lines), lines


def check_ethos_u_tflite(model: str, path: str, inputs: dict[str, np.ndarray],
                         accelerator: str) -> tuple[bool, list[str]]:
    """Runs the written ``.tflite`` (one ``ethos-u`` operator) on the functional model, as a
    Vela file would be run, and compares with the interpreter on the source model."""
    with open(path, "rb") as f:
        data = f.read()
    got, stats = run_vela_model(data, list(inputs.values()), accelerator)
    ops = operation_count(stats.commands)
    fast = stats.high_water.get(2, 0)   # an Ethos-U65's SRAM
    lines = [f"{os.path.basename(path)}: {len(data)} bytes; the stream ran {ops} NPU "
             f"operations, touched {stats.high_water.get(1, 0)} bytes of the arena"
             + (f" and {fast} of the fast scratch" if fast else "")]
    lines += compare(got, tflite_reference(model, list(inputs.values())))
    return all("bit-exact: yes" in line for line in lines[1:]), lines


def _step(title: str, argv: list[str]) -> int:
    print(f"\n== {title}\n$ tvmc {' '.join(argv)}", flush=True)
    return cli.main(argv)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tvm_ethos.demo", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("model", metavar="MODEL.tflite")
    ap.add_argument("--target", default="ethos-n,opencl", help="default ethos-n,opencl")
    ap.add_argument("--out", default=os.path.join("out", "demo"), metavar="DIR",
                    help="where the package, input, outputs and plan report go (out/demo)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random input (0)")
    ap.add_argument("--no-ethos-u", dest="ethos_u", action="store_false",
                    help="skip writing and checking the Ethos-U .tflite (step 5)")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.model):
        print(f"demo: error: model file {args.model!r} does not exist", file=sys.stderr)
        return 2
    if not output_follows_input(args.model, args.seed):
        print(f"demo: {args.model}: the interpreter gives the same output for two different "
              "inputs, so an exactness check on it cannot fail; use a model whose output "
              "follows its input (e.g. resnet8_cifar.tflite)", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    package, report = os.path.join(args.out, "model.tar"), os.path.join(args.out, "plan.json")
    rc = _step("compile: partition summary and per-layer plan (cycles estimated)",
               ["compile", args.model, "--target", args.target, "-o", package,
                "--planner-report", report])
    if rc:
        return rc
    inputs = random_inputs(args.model, args.seed)
    in_path, out_path = os.path.join(args.out, "input.npz"), os.path.join(args.out, "output.npz")
    np.savez(in_path, **inputs)
    print(f"\n== input: random int8, seed {args.seed}, saved to {in_path}")
    rc = _step("run: zero-copy edges, top 5 (NPU part emulated)",
               ["run", package, "--inputs", in_path, "--print-top", "5", "--print-edges",
                "--outputs", out_path])
    if rc:
        return rc
    print("\n== against the TFLite interpreter (ai-edge-litert, reference kernels)")
    ok, lines = check_outputs(args.model, inputs, out_path)
    print("\n".join(lines))
    if not args.ethos_u:
        return 0 if ok else 1
    tfl = os.path.join(args.out, "model_ethos_u.tflite")
    rc = _step("Ethos-U for TFLite Micro: the generated command stream as an ethos-u operator",
               ["compile", args.model, "--target", "ethos-u", "-o", tfl,
                "--output-format", "tflite"])
    if rc:
        return rc
    print("\n== the .tflite's stream on the functional Ethos-U model (emulated) against the "
          "interpreter")
    ok_u, lines = check_ethos_u_tflite(args.model, tfl, inputs, DEFAULT_ACCELERATOR.name)
    print("\n".join(lines))
    return 0 if ok and ok_u else 1


if __name__ == "__main__":
    sys.exit(main())
