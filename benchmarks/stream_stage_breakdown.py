"""Where the CPU time of the ``streams`` stage goes (issue 27): Vela's work the stage must do
(the weight encodings, the register command stream, the block search) beside ours (the
emission around them, the arena layout, the memory check's dry run).

Each model is compiled in this process as ``tvmc compile MODEL --target ethos-u`` compiles it
(``tvm_ethos.compile_tflite``) with the functions of each row wrapped to add up their CPU
time (``time.process_time``, which shared cores disturb less than wall time) and calls. The
stage is ``subgraph_stream``; a row indented under another is part of it, and "ours" is the
stage less Vela's rows. Each figure is the median of ``--repeat`` compiles (the first,
which loads Vela's modules, untimed), each as a fresh ``tvmc`` process meets it: what a
module remembers from an earlier compile (:data:`MEMOS`) is forgotten first. The code
timed is whatever PYTHONPATH puts first, so one command compares two checkouts::

    for d in /work/main $PWD; do
        PYTHONPATH=$d .venv/bin/python benchmarks/stream_stage_breakdown.py; done
"""
from __future__ import annotations

import argparse
import functools
import importlib
import os
import statistics
import sys
import time
from collections import Counter

MODELS = {"mobilenet_v1_1.0_224": "mobilenet_v1_1.0_224.tflite",
          "resnet8_cifar": "resnet8_cifar.tflite",
          "person_detect": os.path.join("tflite-micro", "person_detect.tflite")}
ACCEL = "ethos-u55-128"
STAGE = "streams stage"
#: (row, module, function), the stage first; Vela's rows are named "Vela: ..."
ROWS = (
    (STAGE, "tvm_ethos.pipeline.subgraph_stream", "subgraph_stream"),
    ("  generation", "tvm_ethos.backends.ethos_u.stream_cascade", "generate_planned"),
    ("    Vela: weight encoding", "ethosu.vela.api", "npu_encode_weights"),
    ("    Vela: register command stream", "ethosu.vela.api",
     "npu_generate_register_command_stream"),
    ("    Vela: block search", "ethosu.vela.api", "npu_find_block_configs"),
    ("    arena layout", "tvm_ethos.backends.ethos_u.stream_plan", "arena_layout"),
    ("  memory check's dry run", "tvm_ethos.backends.ethos_u.stream_run", "stream_report"),
)
#: (module, attribute) of what a checkout may remember from one compile to the next: the
#: functional model's decoded streams, an older checkout's block-search answers
MEMOS = (("ethosu_stream.run", "_PROGRAMS"),
         ("tvm_ethos.backends.ethos_u.npu_ops", "_LEGAL_BLOCKS"))


def forget() -> None:
    """Clear every :data:`MEMOS` dict the checkout has."""
    for module, name in MEMOS:
        memo = getattr(importlib.import_module(module), name, None)
        if memo is not None:
            memo.clear()


def _timed(fn, row: str, cpu: Counter, calls: Counter):
    """``fn`` adding its CPU seconds and calls to ``row`` (a call inside another call of the
    same row counts once)."""
    depth = [0]

    @functools.wraps(fn)
    def run(*args, **kwargs):
        depth[0] += 1
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            if not depth[0]:
                cpu[row] += time.process_time() - t0
                calls[row] += 1
    return run


def instrument(cpu: Counter, calls: Counter) -> None:
    """Wrap each row's function, in its module and wherever a loaded module imported it by
    name (``from m import f``)."""
    for row, module, name in ROWS:
        real = getattr(importlib.import_module(module), name)
        wrapped = _timed(real, row, cpu, calls)
        for mod in list(sys.modules.values()):
            for attr, value in list(getattr(mod, "__dict__", {}).items()):
                if value is real:
                    setattr(mod, attr, wrapped)


def breakdown(models_dir: str, names: list[str], repeat: int,
              optimise: str = "Performance") -> dict[str, dict[str, tuple]]:
    """{model: {row: (median CPU seconds, calls)}}; ``optimise``: Vela's ``--optimise``
    (``Size`` compiles for the plan of least memory, as ``tvmc --optimise Size`` does)."""
    from planner.budgets import SIZE

    options = {"budget": SIZE} if optimise == "Size" else {}
    import tvm_ethos
    import tvm_ethos.tflite_direct.group  # noqa: F401  (imports the stage by name)

    cpu: Counter = Counter()
    calls: Counter = Counter()
    instrument(cpu, calls)
    out = {}
    for name in names:
        with open(os.path.join(models_dir, MODELS[name]), "rb") as f:
            data = f.read()
        runs = []
        for k in range(repeat + 1):
            cpu.clear()
            calls.clear()
            forget()
            tvm_ethos.compile_tflite(data, "ethos-u", accelerator_config=ACCEL, **options)
            if k:   # the first loads Vela's modules
                runs.append((dict(cpu), dict(calls)))
        rows = {row: (statistics.median(r[0].get(row, 0.0) for r in runs),
                      runs[0][1].get(row, 0)) for row, _, _ in ROWS}
        vela = sum(s for row, (s, _) in rows.items() if "Vela:" in row)
        rows["  ours (the stage less Vela's rows)"] = (rows[STAGE][0] - vela, None)
        out[name] = rows
    return out


def table(result: dict[str, dict[str, tuple]]) -> str:
    lines = [f"{'model':<22} {'row':<38} {'CPU s':>7} {'share':>6} {'calls':>6}"]
    lines.append("-" * len(lines[0]))
    for name, rows in result.items():
        stage = rows[STAGE][0] or 1e-9
        for row, (s, n) in rows.items():
            lines.append(f"{name:<22} {row:<38} {s:>7.3f} {s / stage:>6.0%} "
                         f"{'' if n is None else n:>6}")
    return "\n".join(lines)


def model_arguments(description: str, repeat: int) -> argparse.ArgumentParser:
    """The options of the benchmarks that compile MODELS in-process: --models, --only,
    --repeat and --optimise."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--models", default=os.environ.get("TVM_ETHOS_MODELS", os.path.join(
        os.path.dirname(__file__), "..", "..", "shared", "models")))
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), default=list(MODELS))
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--optimise", choices=("Performance", "Size"), default="Performance")
    return ap


if __name__ == "__main__":
    a = model_arguments(__doc__.splitlines()[0], 3).parse_args()
    code = os.path.dirname(os.path.dirname(importlib.import_module("tvm_ethos").__file__))
    print(f"code: {code}, --optimise {a.optimise}")
    print(table(breakdown(a.models, a.only, a.repeat, a.optimise)))
