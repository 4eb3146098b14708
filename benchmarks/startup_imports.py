"""Where the start-up of ``tvmc compile MODEL.tflite --target ethos-u`` goes (issue 27).

Each row is a fresh process that imports a little more of what the compile loads, so the
difference from the row above is what that layer costs: Python itself, numpy, the TFLite
flatbuffer bindings (``tflite``), the Vela modules the compile loads, every project module
the compile loads (read from a first run's ``sys.modules``), then the whole
``tvmc compile MODEL --target ethos-u --output-format tflite`` (its parser, checks, plan,
streams and writer besides). Bytecode is cached as an installed package has it
(``compile_speed.py``'s environment). With ``--valgrind`` each row is also counted in
instructions (``cachegrind``), which the load of a shared machine does not change; CPU time
(user + system) is the median of ``--repeat`` runs.

  python benchmarks/startup_imports.py [--models /work/shared/models] [--model resnet8_cifar]
      [--code OTHER_CHECKOUT] [--repeat 5] [--valgrind]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

#: the Vela modules the project imports (each inside the function that needs it)
VELA = ("ethosu.vela.api", "ethosu.vela.architecture_features", "ethosu.vela.operation",
        "ethosu.vela.tflite_mapping", "ethosu.vela.register_command_stream_generator",
        "ethosu.vela.tensor", "ethosu.vela.errors", "ethosu.vela.numeric_util")
PROJECT = ("tvm_ethos", "planner", "ethosu_stream", "ethos_arch")
MODEL_FILES = {"resnet8_cifar": "resnet8_cifar.tflite",
               "person_detect": os.path.join("tflite-micro", "person_detect.tflite"),
               "mobilenet_v1_1.0_224": "mobilenet_v1_1.0_224.tflite"}
_IMPORT = "import importlib\nfor m in {mods!r}:\n    importlib.import_module(m)\n"
_COMPILE = ("import sys\nfrom tvm_ethos.cli import main\n"
            "status = main(['compile', {model!r}, '--target', 'ethos-u', '--output-format', "
            "'tflite', '-o', {out!r}, '-q', '--no-progress'])\n")
_REPORT = ("import json\nprint(json.dumps({'status': status, 'modules': sorted(sys.modules),"
           " 'order': list(sys.modules)}))\n")


def _env(code: str, pycache: str) -> dict:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=pycache, PYTHONPATH=code)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _cpu(script: str, env: dict, cwd: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", script], env=env, cwd=cwd, check=True,
                   capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _instructions(script: str, env: dict, cwd: str) -> int:
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                           "--cachegrind-out-file=/dev/null", sys.executable, "-c", script],
                          env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return int(re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)[1].replace(",", ""))


def rows(model: str, out: str, loaded: list[str]) -> list[tuple[str, str]]:
    """(layer, script) from Python alone to the whole compile, each importing all above it."""
    project = [m for m in loaded if m.split(".")[0] in PROJECT]
    vela = [m for m in VELA if m in loaded]
    layers = [("python (site, the editable install's finder)", []),
              ("numpy", ["numpy"]),
              ("tflite flatbuffer bindings", ["flatbuffers", "tflite"]),
              (f"Vela ({len(vela)} of its modules, what they import)", vela),
              (f"the project's {len(project)} modules it loads", project)]
    out_rows, mods = [], []
    for name, more in layers:
        mods = mods + more
        out_rows.append((name, _IMPORT.format(mods=mods)))
    out_rows.append(("tvmc compile (parser, checks, plan, streams, write)",
                     _COMPILE.format(model=model, out=out)))
    return out_rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.environ.get("TVM_ETHOS_MODELS", os.path.join(
        os.path.dirname(__file__), "..", "..", "shared", "models")))
    ap.add_argument("--model", default="resnet8_cifar", choices=sorted(MODEL_FILES))
    ap.add_argument("--code", default=os.path.join(os.path.dirname(__file__), ".."),
                    help="the source tree tvmc runs from (default this one)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--valgrind", action="store_true",
                    help="count instructions too (needs valgrind; about a minute a row)")
    args = ap.parse_args()
    code = os.path.abspath(args.code)
    model = os.path.abspath(os.path.join(args.models, MODEL_FILES[args.model]))
    if args.valgrind and shutil.which("valgrind") is None:
        print("--valgrind: valgrind is not installed", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="startup_imports_")
    try:
        env = _env(code, os.path.join(tmp, "pycache"))
        out = os.path.join(tmp, "out.tflite")
        first = subprocess.run([sys.executable, "-c", _COMPILE.format(model=model, out=out)
                                + _REPORT], env=env, cwd=tmp, capture_output=True, text=True,
                               check=True)   # also fills the bytecode cache
        report = json.loads(first.stdout.splitlines()[-1])
        table = rows(model, out, report["order"])
        print(f"{args.model}: tvmc compile --target ethos-u --output-format tflite, from {code}; "
              f"CPU s median of {args.repeat}" + (", instructions (10^6)" if args.valgrind
                                                  else ""))
        print(f"{'layer':58} {'CPU':>7} {'+CPU':>7}" + (f" {'instr':>7} {'+instr':>7}"
                                                        if args.valgrind else ""))
        last_cpu = last_ir = 0.0
        for name, script in table:
            cpu = statistics.median(_cpu(script, env, tmp) for _ in range(args.repeat))
            line = f"{name:58} {cpu:7.3f} {cpu - last_cpu:+7.3f}"
            if args.valgrind:
                ir = _instructions(script, env, tmp) / 1e6
                line += f" {ir:7.0f} {ir - last_ir:+7.0f}"
                last_ir = ir
            last_cpu = cpu
            print(line, flush=True)
        off = [m for m in ("tvm", "tvm_ffi") if m in report["modules"]]
        print(f"loaded by the compile: {len(report['modules'])} modules; "
              f"tvm/tvm_ffi: {', '.join(off) or 'neither'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
