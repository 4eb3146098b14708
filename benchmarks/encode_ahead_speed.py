"""The stream generation with its largest weight encodings done ahead by a forked child
(``tvm_ethos.backends.ethos_u.encode_ahead``) and without, measured in the same run.

Each model is compiled in this process as ``tvmc compile MODEL --target ethos-u`` compiles it
(``tvm_ethos.compile_tflite``, ethos-u55-128), ``--repeat`` times each way, the two taking
turns (so that they meet the same load), the fork guard's answer (``second_process_pays``)
forced either way; the predictions and thresholds are the compiler's own, so a model whose
large weights are too few does not fork either way. Per way: the least wall seconds of the
stream generation (``generate_planned``; the compile that met the least load), and the
medians of its wall seconds, its CPU seconds on this process, the CPU seconds of the forked
child (``getrusage(RUSAGE_CHILDREN)``: it is reaped before the generation returns), and the
encodings predicted and taken from the child. The first compile (which loads Vela's modules)
is not counted. The load average is printed: the child pays only with an idle core.

    .venv/bin/python benchmarks/encode_ahead_speed.py [--models ../shared/models]
        [--only mobilenet_v1_1.0_224] [--repeat 5] [--optimise Size]
"""
from __future__ import annotations

import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.stream_stage_breakdown import (  # noqa: E402
    ACCEL,
    MODELS,
    forget,
    model_arguments,
)

WAYS = ("inline", "ahead")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(models_dir: str, names: list[str], repeat: int, optimise: str) -> list[tuple]:
    """[(model, way, least wall, wall, this process's CPU, child CPU, predicted, taken)],
    medians but the least wall (the compile that met the least load)."""
    import tvm_ethos
    from planner.budgets import SIZE
    from tvm_ethos.backends.ethos_u import encode_ahead, stream_cascade

    options = {"budget": SIZE} if optimise == "Size" else {}
    generate = stream_cascade.generate_planned
    sample: list = []

    def timed(*args, **kwargs):
        wall, cpu, child = time.perf_counter(), time.process_time(), _children_cpu()
        try:
            return generate(*args, **kwargs)
        finally:
            sample.append((time.perf_counter() - wall, time.process_time() - cpu,
                           _children_cpu() - child))

    for module in list(sys.modules.values()):     # wherever it was imported by name
        if getattr(module, "generate_planned", None) is generate:
            module.generate_planned = timed
    out = []
    for name in names:
        with open(os.path.join(models_dir, MODELS[name]), "rb") as f:
            data = f.read()
        runs: dict[str, list] = {way: [] for way in WAYS}
        for k in range(repeat + 1):
            for way in WAYS if k % 2 else WAYS[::-1]:
                encode_ahead.second_process_pays = lambda ahead=way == "ahead": ahead
                encode_ahead.TAKEN = log = []
                sample.clear()
                forget()
                tvm_ethos.compile_tflite(data, "ethos-u", accelerator_config=ACCEL, **options)
                if k:
                    totals = [sum(s[i] for s in sample) for i in range(3)]
                    runs[way].append(totals + [sum(p for p, _ in log),
                                               sum(t for _, t in log)])
        for way, rows in runs.items():
            out.append((name, way, min(r[0] for r in rows)) +
                       tuple(statistics.median(r[i] for r in rows) for i in range(5)))
    encode_ahead.TAKEN = None
    return out


def table(rows: list[tuple]) -> str:
    lines = [f"{'model':<22} {'way':>7} {'least wall s':>12} {'wall s':>7} {'CPU s':>7} "
             f"{'child CPU s':>11} {'predicted':>9} {'taken':>6}"]
    lines.append("-" * len(lines[0]))
    for name, way, least, wall, cpu, child, predicted, taken in rows:
        lines.append(f"{name:<22} {way:>7} {least:>12.3f} {wall:>7.3f} {cpu:>7.3f} "
                     f"{child:>11.3f} {predicted:>9.0f} {taken:>6.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    a = model_arguments(__doc__.splitlines()[0], 5).parse_args()
    load = os.getloadavg()[0]
    print(f"--optimise {a.optimise}, load average {load:.2f} at the start, "
          f"{os.cpu_count()} CPUs; the generation's medians of {a.repeat} compiles each")
    print(table(measure(a.models, a.only, a.repeat, a.optimise)))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
