"""Compile time and command-stream bytes against Vela 5.2, in the same run (issue 27).

For each model on ethos-u55-128: Vela's ``vela`` CLI and ``tvmc compile --target ethos-u`` to
a ``.tflite``, each a fresh process (what a user waits for, imports included), wall time the
median of ``--repeat`` runs (the ``--optimise Size`` row: one run); our stage breakdown
from ``-v``'s stage lines (the median run's); then the NPU command stream bytes of each
output file per NPU operation (the stream words of every ``ethos-u`` operator,
``ethosu_stream.tflite_custom_op.read_ethos_u_ops``) and the scratch arena the file asks
for (the SRAM on an Ethos-U55), at Vela's default and ``--optimise Size``. Wall time and
CPU time (user + system) are both shown: on a shared machine the wall time also counts
waiting for a core.

``--vela-legacy`` also times Vela 5.2's own Python compiler (``--debug-force-legacy-core``,
which Vela keeps beside Regor, its C++ default), interleaved with the others: the peer that
generates streams through the same Python code our compile calls (``ethosu.vela``'s register
generator and weight encoder).

``--before OTHER_CHECKOUT`` also compiles each model with another tree's tvmc, as often as
ours and interleaved with ours, and shows its wall and CPU time, stage breakdown, stream
bytes per NPU operation and arena beside ours (a change measured before and after in the
same run).

  python benchmarks/compile_speed.py [--models /work/shared/models] [--repeat 3]
      [--out out/compile_speed] [--only resnet8_cifar] [--no-size] [--code OTHER_CHECKOUT]
      [--before OTHER_CHECKOUT] [--vela-legacy]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from ethosu_stream.registers import decode_stream
from ethosu_stream.run import KERNEL_OPERATIONS
from ethosu_stream.tflite_custom_op import read_ethos_u_ops

MODELS = {"mobilenet_v1_1.0_224": "mobilenet_v1_1.0_224.tflite",
          "resnet8_cifar": "resnet8_cifar.tflite",
          "person_detect": os.path.join("tflite-micro", "person_detect.tflite")}
ACCEL = "ethos-u55-128"
#: ``-v``'s stage lines: ``tvm_ethos.stages: INFO: stage NAME: 1.23 s``
STAGE_LINE = re.compile(r"stage (?P<name>[\w .-]+?): (?P<s>[0-9.]+) s")


def _vela_cmd(model: str, out_dir: str, optimise: str, legacy: bool = False) -> list[str]:
    vela = os.path.join(os.path.dirname(sys.executable), "vela")
    return [vela, model, "--accelerator-config", ACCEL, "--optimise", optimise,
            "--output-dir", out_dir] + (["--debug-force-legacy-core"] if legacy else [])


def _tvmc_cmd(model: str, out_file: str, optimise: str) -> list[str]:
    return [sys.executable, "-m", "tvm_ethos", "-v", "compile", model, "--target", "ethos-u",
            "--accelerator-config", ACCEL, "--optimise", optimise, "-o", out_file,
            "--no-progress", "-q"]


def _env(code: str | None, pycache: str) -> dict:
    """The runs' environment: bytecode cached (in ``pycache``), as an installed package has
    it, for Vela's and our modules alike; ``code``: the tree tvm_ethos is imported from."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = _root(code)
    return env


def _root(code: str | None) -> str:
    """The tree tvmc runs from: ``code``, else the one this file is in (``python -m`` puts
    the working directory first on the path, so the runs start there too)."""
    return os.path.abspath(code or os.path.join(os.path.dirname(__file__), ".."))


def _timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds: user + system, stderr) of one run of ``cmd``. The CPU time
    is shown beside the wall time: on a shared machine the wall time also counts waiting."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=env["PYTHONPATH"])
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr


def stages(stderr: str) -> dict[str, float]:
    """Seconds per stage from ``-v``'s stage lines (a stage run twice is summed)."""
    out: dict[str, float] = {}
    for m in STAGE_LINE.finditer(stderr):
        out[m["name"]] = out.get(m["name"], 0.0) + float(m["s"])
    return out


def with_outside(seconds: dict[str, float], wall: float) -> dict[str, float]:
    """``seconds`` and, last, the run's wall time outside every stage: Python's start,
    imports, argument parsing, reading and writing files, exit."""
    return {**seconds, "outside stages": wall - sum(seconds.values())}


def stream_bytes(path: str) -> tuple[int, int, int]:
    """(command stream bytes of every ethos-u operator, NPU operations in them, the largest
    scratch arena one of them asks for) of a .tflite. An NPU operation is a kernel command
    (``ethosu_stream.run.KERNEL_OPERATIONS``); DMAs and waits are not."""
    with open(path, "rb") as f:
        data = f.read()
    total = ops = arena = 0
    for op in read_ethos_u_ops(data):
        words = op.words
        total += 4 * len(words)
        ops += npu_operations(words)
        arena = max(arena, op.scratch_bytes)
    return total, ops, arena


def npu_operations(words) -> int:
    """The kernel operations a stream starts (NPU_OP_CONV, _DEPTHWISE, _POOL, _ELEMENTWISE)."""
    return sum(c.name in KERNEL_OPERATIONS for c in decode_stream(words))


def measure(models_dir: str, out: str, repeat: int, only: list[str] | None,
            size: bool, code: str | None = None, before: str | None = None,
            legacy: bool = False) -> list[dict]:
    rows = []
    models_dir, out = os.path.abspath(models_dir), os.path.abspath(out)
    env = _env(code, os.path.join(out, "pycache"))
    env_before = _env(before, os.path.join(out, "pycache_before")) if before else None
    warm = False
    for name, rel in MODELS.items():
        if only and name not in only:
            continue
        model = os.path.join(models_dir, rel)
        for optimise in ("Performance",) + (("Size",) if size else ()):
            vdir = os.path.join(out, "vela", optimise)
            ofile = os.path.join(out, "tvmc", optimise, name + ".tflite")
            os.makedirs(os.path.dirname(ofile), exist_ok=True)
            if not warm:   # bytecode written and files read once, untimed
                _timed(_vela_cmd(model, vdir, optimise), env)
                _timed(_tvmc_cmd(model, ofile, optimise), env)
                if env_before is not None:
                    _timed(_tvmc_cmd(model, ofile, optimise), env_before)
                warm = True
            vela_t, vela_c, ours_t, ours_c, ours_err = [], [], [], [], []
            before_t, before_c, before_err = [], [], []
            legacy_t, legacy_c = [], []
            ldir = os.path.join(out, "vela-legacy", optimise)
            bfile = os.path.join(out, "before", optimise, name + ".tflite")
            if env_before is not None:
                os.makedirs(os.path.dirname(bfile), exist_ok=True)
            for _ in range(repeat if optimise == "Performance" else 1):
                wall, cpu, _err = _timed(_vela_cmd(model, vdir, optimise), env)
                vela_t.append(wall)
                vela_c.append(cpu)
                if legacy:
                    wall, cpu, _err = _timed(_vela_cmd(model, ldir, optimise, True), env)
                    legacy_t.append(wall)
                    legacy_c.append(cpu)
                wall, cpu, err = _timed(_tvmc_cmd(model, ofile, optimise), env)
                ours_t.append(wall)
                ours_c.append(cpu)
                ours_err.append(err)
                if env_before is not None:
                    wall, cpu, err = _timed(_tvmc_cmd(model, bfile, optimise), env_before)
                    before_t.append(wall)
                    before_c.append(cpu)
                    before_err.append(err)
            mid = sorted(range(len(ours_t)), key=ours_t.__getitem__)[len(ours_t) // 2]
            vb, vops, vsram = stream_bytes(os.path.join(vdir, name + "_vela.tflite"))
            ob, oops, osram = stream_bytes(ofile)
            bb = bops = bsram = None
            before = {}
            if env_before is not None:
                bb, bops, bsram = stream_bytes(bfile)
                bmid = sorted(range(len(before_t)), key=before_t.__getitem__)[len(before_t) // 2]
                before = {"before_s": statistics.median(before_t),
                          "before_cpu": statistics.median(before_c),
                          "before_stages": with_outside(stages(before_err[bmid]),
                                                        before_t[bmid])}
            rows.append({"model": name, "optimise": optimise,
                         "vela_s": statistics.median(vela_t), "ours_s": statistics.median(ours_t),
                         "vela_cpu": statistics.median(vela_c),
                         "ours_cpu": statistics.median(ours_c),
                         "stages": with_outside(stages(ours_err[mid]), ours_t[mid]),
                         "vela_bytes": vb, "vela_ops": vops, "ours_bytes": ob, "ours_ops": oops,
                         "before_bytes": bb, "before_ops": bops, "vela_sram": vsram,
                         "ours_sram": osram, "before_sram": bsram, **before,
                         **({"legacy_s": statistics.median(legacy_t),
                             "legacy_cpu": statistics.median(legacy_c)} if legacy else {})})
    return rows


def _per(b: int, n: int) -> str:
    return f"{b / n:6.0f}" if n else f"{'-':>6}"


def _beside(rows: list[dict], peer: str, title: str) -> list[str]:
    """Lines comparing ours with ``peer``'s wall and CPU medians (the rows' ``PEER_s`` and
    ``PEER_cpu``), where the rows have them."""
    rows = [r for r in rows if f"{peer}_s" in r]
    if not rows:
        return []
    lines = ["", title,
             f"{'model':<22} {'optimise':<11} {peer + ' s':>10} {'ours s':>7} {'x':>5} "
             f"{peer + ' cpu':>12} {'ours cpu':>8} {'x':>5}  (wall and CPU, medians)"]
    for r in rows:
        wall, cpu = r[f"{peer}_s"], r[f"{peer}_cpu"]
        lines.append(f"{r['model']:<22} {r['optimise']:<11} {wall:>10.2f} {r['ours_s']:>7.2f} "
                     f"{r['ours_s'] / wall:>5.2f} {cpu:>12.2f} {r['ours_cpu']:>8.2f} "
                     f"{r['ours_cpu'] / max(cpu, 1e-9):>5.2f}")
    return lines


def table(rows: list[dict]) -> str:
    before = any(r.get("before_bytes") is not None for r in rows)
    head = (f"{'model':<22} {'optimise':<11} {'Vela s':>7} {'ours s':>7} {'x':>6} "
            f"{'Vela cpu':>8} {'ours cpu':>8} {'x':>6} "
            f"{'stream B Vela':>13} {'ops':>4} {'B/op':>6} {'SRAM':>8} "
            f"{'stream B ours':>13} {'ops':>5} {'B/op':>6} {'SRAM':>8}"
            + (f" {'stream B before':>15} {'ops':>5} {'B/op':>6} {'SRAM':>8}" if before
               else ""))
    lines = [head, "-" * len(head)]
    for r in rows:
        line = (f"{r['model']:<22} {r['optimise']:<11} {r['vela_s']:>7.2f} "
                f"{r['ours_s']:>7.2f} {r['ours_s'] / r['vela_s']:>6.1f} "
                f"{r['vela_cpu']:>8.2f} {r['ours_cpu']:>8.2f} "
                f"{r['ours_cpu'] / max(r['vela_cpu'], 1e-9):>6.1f} "
                f"{r['vela_bytes']:>13,} {r['vela_ops']:>4} "
                f"{_per(r['vela_bytes'], r['vela_ops'])} {r['vela_sram']:>8,} "
                f"{r['ours_bytes']:>13,} {r['ours_ops']:>5} "
                f"{_per(r['ours_bytes'], r['ours_ops'])} {r['ours_sram']:>8,}")
        if before:
            bb, bops, bsram = r.get("before_bytes"), r.get("before_ops"), r.get("before_sram")
            line += (f" {bb:>15,} {bops:>5} {_per(bb, bops)} {bsram:>8,}" if bb is not None
                     else f" {'-':>15} {'-':>5} {'-':>6} {'-':>8}")
        lines.append(line)
    lines += _beside(rows, "before", "the other checkout (--before), in the same run:")
    lines += _beside(rows, "legacy",
                     "Vela 5.2's Python core (--debug-force-legacy-core), in the same run:")
    for label, key in (("our", "stages"), ("before's", "before_stages")):
        if not any(r.get(key) for r in rows):
            continue
        lines.append("")
        lines.append(f"{label} stages (s, the median run's; -v's stage lines):")
        for r in rows:
            if r.get(key):
                lines.append(f"  {r['model']} {r['optimise']}: " + ", ".join(
                    f"{k} {v:.2f}" for k, v in r[key].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.environ.get("TVM_ETHOS_MODELS", os.path.join(
        os.path.dirname(__file__), "..", "..", "shared", "models")))
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--no-size", action="store_true", help="skip the --optimise Size row")
    ap.add_argument("--code", default=None,
                    help="the source tree tvmc runs from (another checkout, to compare)")
    ap.add_argument("--before", default=None,
                    help="another checkout whose stream bytes are shown beside ours")
    ap.add_argument("--vela-legacy", action="store_true",
                    help="also time Vela's Python core (--debug-force-legacy-core)")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="compile_speed_")
    print(table(measure(a.models, out, a.repeat, a.only, not a.no_size, a.code,
                      a.before, a.vela_legacy)))
