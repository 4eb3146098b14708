"""Reliability counts of the fuzz corpora (issue 25): crashes, hangs, tracebacks, silently
wrong results and peak memory, one row per corpus.

    python benchmarks/reliability.py                       # 200 cases per corpus
    python benchmarks/reliability.py --cases 1000 --corpora tflite,planner

Corpora:

* ``tflite``: mutated ``.tflite`` models (``tests/reliability/tflite_mutator.py``) through
  ``planner.tflite.load_tflite`` and ``tvm_ethos.load_model`` (validation, then TVM's real
  importer for the accepted cases while ``--full-budget`` lasts), by the crash-isolated
  harness of ``tests/reliability/fuzz_harness.py``;
* ``onnx``: mutated ONNX bytes through ``tvm_ethos.load_model`` (same harness; needs the
  ``onnx`` package);
* ``planner``: mutated planner JSON graphs (every number of a seed graph's full form may
  become zero, negative or absurd; fields dropped or of the wrong type), planned on a random
  device; a Proposal that comes back is checked against the stripe-by-stripe simulator (the
  oracle of ``tests/reliability/test_fuzz_planner.py``);
* ``cli``: ``tvmc plan / compile / run`` argument lists drawn from good and bad paths
  (empty, ``/proc``, ``/dev/full``, ``/dev/zero``, folders, missing folders, the model
  itself) and good and bad numbers; a bad argument must give exit status 2 and one line, a
  good list exit status 0 and its output files.

Columns: ``crashes`` a worker killed by a signal; ``hangs`` a case past ``--case-timeout``
(10 s); ``tracebacks`` an exception other than the documented one, or an error that is
empty, several lines, a traceback or Python/TVM internals; ``wrong`` a success that should
not be (a bad argument accepted, an output missing, a Proposal the simulator disagrees with);
``peak RSS`` the largest resident set of the corpus' worker processes, against the largest
legitimate case of the corpus run alone in a fresh process (``legit``; the goal is at most
2x). Each corpus runs in its own process, so its workers' peak is its own.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "tvm_ethos")]

CORPORA = ("tflite", "onnx", "planner", "cli")
DEVICES = ("ethos-u55-128", "ethos-u65-256", "ethos-n78-1tops")
INTERESTING = (0, -1, 1, 2, 3, 7, 255, 65535, 65536, 65537, 1 << 20, 1 << 30, (1 << 31) - 1,
               1 << 31, 1 << 40, 1 << 63)


# ----------------------------------------------------------------------------- measuring
def _peak_rss_mib() -> float:
    """The largest resident set of this process and of its waited-for children, MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "tvm_ethos")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TVM_NUM_THREADS", "1")
    return env


def _self(*argv: str, timeout: float | None = None) -> dict:
    """Run this script with ``argv`` in a fresh process; its last ``RESULT`` line."""
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], env=_env(),
                       capture_output=True, text=True, timeout=timeout)
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{' '.join(argv)} gave no result (exit {r.returncode}): "
                     f"{r.stderr[-2000:]}")


# ----------------------------------------------------------------------------- the harness
def _harness(corpus: str, cases: int, seed: int, case_timeout: float, full_budget: float
             ) -> dict:
    """The tflite / onnx corpus through tests/reliability/fuzz_harness.py."""
    from tests.reliability.fuzz_harness import run_campaign

    targets = "onnx" if corpus == "onnx" else "planner,frontend"
    with tempfile.TemporaryDirectory() as save:
        report = run_campaign(cases, campaign=seed, workers=2, corpus=corpus, targets=targets,
                              case_timeout=case_timeout, full_timeout=case_timeout,
                              full_budget=0.0 if corpus == "onnx" else full_budget,
                              save_dir=save, max_restarts=1000)
    counts = {"crashes": 0, "hangs": 0, "tracebacks": 0, "wrong": None}
    for f in report.failures:
        if f.kind == "crash":
            counts["crashes"] += 1
        elif f.kind == "hang" or "(hang)" in f.detail:
            counts["hangs"] += 1
        else:
            counts["tracebacks"] += 1
    examples = [f"{f.kind} case {f.index}: {f.detail[:200]}" for f in report.failures[:5]]
    accepted = sum(c.get("ok", 0) for c in report.counts.values())
    return dict(counts, cases=report.cases + report.full_cases, accepted=accepted,
                slowest_s=None, examples=examples)


# ----------------------------------------------------------------------------- our workers
def _run_workers(corpus: str, cases: int, seed: int, case_timeout: float, extra: list[str]
                 ) -> dict:
    """Cases 0 .. cases-1 of ``corpus`` in a worker process with a heartbeat per case: a
    worker that dies is a crash, one silent for ``case_timeout`` + 5 s is killed as a hang;
    either way a new worker goes on after the case."""
    counts = {"crashes": 0, "hangs": 0, "tracebacks": 0, "wrong": 0}
    examples: list[str] = []
    slowest = 0.0
    start = accepted = done = 0
    while start < cases:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", corpus,
             "--first", str(start), "--cases", str(cases - start), "--seed", str(seed),
             "--case-timeout", str(case_timeout), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env())
        fd = proc.stdout.fileno()
        current, last, pending = None, time.monotonic(), b""
        startup = True
        while True:
            limit = 300 if startup else case_timeout + 5
            # the pipe read raw: a buffered reader may hold a line select() no longer sees
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                last = time.monotonic()
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    kind, _, rest = line.decode().partition(" ")
                    if kind == "C":
                        current, startup = int(rest), False
                    elif kind == "R":
                        r = json.loads(rest)
                        done += 1
                        slowest = max(slowest, r["s"])
                        accepted += r["detail"] == "ok"
                        if r["problem"]:
                            counts[r["problem"]] += 1
                            if len(examples) < 5:
                                examples.append(f"{r['problem']} case {r['i']}: "
                                                f"{r['detail'][:200]}")
                        current = None
                continue
            if time.monotonic() - last > limit:
                proc.kill()
                proc.wait()
                counts["hangs"] += 1
                examples.append(f"hang case {current}: no heartbeat for {limit:.0f} s")
                break
        proc.stdout.close()
        rc = proc.wait()
        if current is None and rc == 0:
            break
        if current is None:                 # died outside a case: give up on the rest
            counts["crashes"] += 1
            examples.append(f"crash: worker exit {rc} outside a case")
            break
        if rc != 0 and rc != -signal.SIGKILL:
            counts["crashes"] += 1
            examples.append(f"crash case {current}: worker exit {rc}")
        done += 1
        start = current + 1
    return dict(counts, cases=done, accepted=accepted, slowest_s=slowest, examples=examples)


def _worker(corpus: str, first: int, cases: int, seed: int, case_timeout: float,
            extra: dict) -> int:
    import faulthandler

    faulthandler.enable()
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    soft = 3 << 30
    resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))
    run_case = {"planner": _PlannerCases, "cli": _CliCases,
                "selftest": _SelfTestCases}[corpus](seed, extra)

    def alarm(signum, frame):
        raise _CaseTimeout()
    signal.signal(signal.SIGALRM, alarm)
    for i in range(first, first + cases):
        out.write(f"C {i}\n")
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, case_timeout)
        try:
            problem, detail = run_case(i)
        except _CaseTimeout:
            problem, detail = "hangs", f"no result after {case_timeout} s"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        out.write("R " + json.dumps({"i": i, "s": time.perf_counter() - t0, "problem": problem,
                                     "detail": detail}) + "\n")
    return 0


class _CaseTimeout(BaseException):
    """A case ran past ``--case-timeout`` (SIGALRM)."""


class _SelfTestCases:
    """The runner's own test (tests/reliability/test_reliability_benchmark.py): case i
    misbehaves as ``extra[str(i)]`` says: ``crash`` (abort), ``hang`` (stuck with SIGALRM
    blocked, so only the parent's watchdog can end it), ``slow`` (stuck in Python),
    ``raw`` (an undocumented exception), ``wrong``; other cases pass."""

    def __init__(self, seed: int, extra: dict):
        self.modes = extra

    def __call__(self, i: int) -> tuple[str | None, str]:
        mode = self.modes.get(str(i))
        if mode == "crash":
            os.abort()
        if mode == "hang":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)
        if mode == "slow":
            time.sleep(3600)
        if mode == "raw":
            return "tracebacks", "IndexError: list index out of range"
        if mode == "wrong":
            return "wrong", "accepted a bad argument"
        return None, "ok"


def _message_problem(msg: str) -> str | None:
    from tests.reliability.fuzz_harness import _message_problem as problem
    return problem(msg)


# ----------------------------------------------------------------------------- planner graphs
class _PlannerCases:
    """Mutated planner JSON graphs, planned; successes checked by the simulator."""

    def __init__(self, seed: int, extra: dict):
        import numpy as np
        import tflite_builder as tb

        from planner.io import graph_to_json
        from planner.tflite import load_tflite
        from tests.helpers.models import MODELS_DIR

        rs = np.random.RandomState(0)
        models = [tb.conv2d(rs), tb.conv2d(rs, depthwise=True), tb.pool(rs),
                  tb.binary(rs), tb.pad_conv(rs), tb.conv_resize_conv(rs, size=(8, 8)),
                  tb.split_convs(rs)]
        kws = MODELS_DIR / "ds_cnn_kws.tflite"
        if kws.exists():
            models.append(kws.read_bytes())
        self.seeds = [graph_to_json(load_tflite(m)) for m in models]
        self.seed = seed

    def __call__(self, i: int) -> tuple[str | None, str]:
        from planner.api import plan
        from planner.devices import get_device
        from planner.errors import PlannerError
        from planner.io import graph_from_json
        from planner.plans import clear_caches
        from tests.reliability.test_fuzz_planner import check_proposal

        clear_caches()          # each case's memory its own, not the memos of those before
        rng = random.Random(self.seed * 1_000_003 + i)
        doc = json.loads(json.dumps(rng.choice(self.seeds)))
        what = [_mutate(doc, rng) for _ in range(rng.randint(0, 3))]
        device = get_device(rng.choice(DEVICES), io_region=rng.choice(("sram", "dram")))
        try:
            graph = graph_from_json(doc)
            result = plan(graph, device, budget=None)
        except PlannerError as e:
            problem = _message_problem(str(e))
            return ("tracebacks", f"{what}: {problem}: {str(e)[:200]}") if problem else \
                (None, "refused")
        except _CaseTimeout:
            raise
        except BaseException as e:  # noqa: BLE001 - anything else is what we count
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return "tracebacks", f"{what}: {type(e).__name__}: {e} at {tb.name}:{tb.lineno}"
        try:
            check_proposal(graph, device, result.chosen, None)
        except _CaseTimeout:
            raise
        except BaseException as e:  # noqa: BLE001 - the simulator refusing the Plan too
            return "wrong", f"{what}: {type(e).__name__}: {str(e)[:300]}"
        return None, "ok"


def _leaves(node, path=()):
    """(path, value) of every number, and every key, of a JSON document."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield path + (k,), v
            yield from _leaves(v, path + (k,))
    elif isinstance(node, list):
        for k, v in enumerate(node):
            yield path + (k,), v
            yield from _leaves(v, path + (k,))


def _mutate(doc: dict, rng: random.Random) -> str:
    """One mutation of ``doc`` in place; what was done."""
    spots = list(_leaves(doc))
    path, value = rng.choice(spots)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    r = rng.random()
    if isinstance(value, int) and not isinstance(value, bool) and r < 0.7:
        new = rng.choice(INTERESTING) * rng.choice((1, 1, 1, -1))
    elif r < 0.8 and isinstance(parent, dict):
        del parent[key]
        return f"drop {'.'.join(map(str, path))}"
    else:
        new = rng.choice((None, "x", 1.5, [], {}, True, "1/0", "-3/2"))
    parent[key] = new
    return f"{'.'.join(map(str, path))}={new!r}"


# ----------------------------------------------------------------------------- CLI arguments
class _CliCases:
    """tvmc argument lists, each argument good or bad; checked by exit status and output."""

    def __init__(self, seed: int, extra: dict):
        self.dir = tempfile.mkdtemp(prefix="tvmc_fuzz_")
        self.model, self.package = extra["model"], extra["package"]
        junk = os.path.join(self.dir, "junk.tflite")
        with open(junk, "wb") as f:
            f.write(os.urandom(600))
        self.bad_inputs = ["", "/dev/zero", "/", "/nonexistent.tflite", junk, self.dir]
        self.bad_outputs = ["", "/proc/a.tar", "/dev/full", "/dev/null", "/",
                            "/nonexistent/x.tar", "/dev/null/x.tar", self.dir + "/"]
        self.seed = seed

    def __call__(self, i: int) -> tuple[str | None, str]:
        from tvm_ethos.cli import main

        rng = random.Random(self.seed * 1_000_003 + i)
        bad = []
        n = [0]

        def pick(good, bads, name):
            if rng.random() < 0.45:
                v = rng.choice(bads)
                bad.append(f"{name}={v!r}")
                return v
            return good

        def fresh(suffix):
            n[0] += 1
            return os.path.join(self.dir, f"case{i}_{n[0]}{suffix}")

        command = rng.choice(("plan", "compile", "run"))
        outputs = []
        if command == "plan":
            argv = ["plan", pick(self.model, self.bad_inputs, "model"),
                    "--target", pick("ethos-u", ["ethos-x", "", "ethos-u,ethos-x"], "target"),
                    "--budget", pick("system", ["lots", "-1", "1", "0"], "budget"),
                    "--jobs", pick("1", ["0", "-2"], "jobs")]
        elif command == "compile":
            out = pick(fresh(".tar"), self.bad_outputs + [self.model], "-o")
            argv = ["compile", pick(self.model, self.bad_inputs, "model"),
                    "--target", pick("ethos-u,llvm", ["ethos-x,llvm", "ethos-u", ""], "target"),
                    "-o", out, "--planner-max_plan_size",
                    pick("4", ["0", "-1", "x"], "max_plan_size")]
            outputs.append(out)
            if rng.random() < 0.5:
                rep = pick(fresh(".json"), self.bad_outputs + [out], "--planner-report")
                argv += ["--planner-report", rep]
                outputs.append(rep)
        else:
            argv = ["run", pick(self.package, self.bad_inputs, "package"),
                    "--seed", pick(str(rng.randrange(2**32)), ["-1", str(2**32)], "seed"),
                    "--repeat", pick("1", ["0", "-3"], "repeat"),
                    "--print-top", pick("3", ["0", "-1"], "print-top")]
            if rng.random() < 0.5:
                out = pick(fresh(".npz"), self.bad_outputs + [self.package], "--outputs")
                argv += ["--outputs", out]
                outputs.append(out)
        argv.append("--no-progress")
        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                rc = main(argv)
        except _CaseTimeout:
            raise
        except BaseException as e:  # noqa: BLE001 - anything else is what we count
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return "tracebacks", f"{argv}: {type(e).__name__}: {e} at {tb.name}:{tb.lineno}"
        text = err.getvalue()
        if rc == 2:
            problem = _message_problem(text.strip()) or \
                (None if text.startswith(f"tvmc {command}") else "not a tvmc error line")
            if problem:
                return "tracebacks", f"{argv}: {problem}: {text[:300]!r}"
            return (None, "refused") if bad else \
                ("wrong", f"{argv}: refused good arguments: {text}")
        if rc != 0:
            return "wrong", f"{argv}: exit status {rc}: {text[:300]!r}"
        if bad:
            return "wrong", f"{argv}: accepted {bad}"
        missing = [o for o in outputs if not os.path.isfile(o)]
        if missing:
            return "wrong", f"{argv}: exit 0 but no {missing}"
        return None, "ok"


def _cli_fixture(folder: str) -> dict:
    """A small model and its compiled package, made once for the cli corpus."""
    import numpy as np
    import tflite_builder as tb

    from tvm_ethos.cli import main

    model = os.path.join(folder, "conv.tflite")
    with open(model, "wb") as f:
        f.write(tb.conv2d(np.random.RandomState(0)))
    package = os.path.join(folder, "conv.tar")
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["compile", model, "--target", "ethos-u,llvm", "-o", package, "-q",
                   "--no-progress"])
    if rc != 0:
        raise SystemExit("could not compile the cli corpus' model")
    return {"model": model, "package": package}


# ----------------------------------------------------------------------------- legitimate
def _legit(corpus: str) -> None:
    """The largest legitimate case of a corpus, alone in a process that imports what the
    corpus' workers import (so the ratio compares cases, not imports)."""
    if corpus == "tflite":
        from tests.helpers.models import MODELS_DIR
        from tests.reliability.fuzz_harness import Targets
        seeds = [p for p in sorted(MODELS_DIR.glob("*.tflite")) if "1.0_224" not in p.name]
        largest = max(seeds, key=lambda p: p.stat().st_size).read_bytes()
        with tempfile.TemporaryDirectory() as d:
            targets = Targets(["planner", "frontend"], d)
            targets.planner(largest)
            targets.frontend_full(largest)
    elif corpus == "onnx":
        from tests.reliability.fuzz_harness import Targets
        from tests.reliability.onnx_seeds import _float_mlp, _qdq_conv
        with tempfile.TemporaryDirectory() as d:
            targets = Targets(["onnx"], d)
            for make in (_qdq_conv, _float_mlp):
                targets.onnx(make())
    elif corpus == "planner":
        from planner.api import plan
        from planner.devices import get_device
        from planner.io import graph_from_json
        from planner.tflite import load_tflite
        from tests.helpers.models import MODELS_DIR
        from tests.reliability.test_fuzz_planner import check_proposal
        largest = MODELS_DIR / "mobilenet_v1_0.25_96.tflite"     # the largest seed's family
        for graph in [graph_from_json(d) for d in _PlannerCases(0, {}).seeds] + \
                [load_tflite(str(largest))] * largest.exists():
            for name in DEVICES:
                device = get_device(name)
                check_proposal(graph, device, plan(graph, device, budget=None).chosen, None)
    else:
        from tvm_ethos.cli import main
        with tempfile.TemporaryDirectory() as d:
            fx = _cli_fixture(d)
            with contextlib.redirect_stdout(io.StringIO()):
                main(["run", fx["package"], "--outputs", os.path.join(d, "o.npz"),
                      "--no-progress"])


# ----------------------------------------------------------------------------- the table
def _child(corpus: str, a) -> dict:
    if corpus in ("tflite", "onnx"):
        return _harness(corpus, a.cases, a.seed, a.case_timeout, a.full_budget)
    extra: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        if corpus == "cli":
            fx = _cli_fixture(d)
            extra = ["--extra", json.dumps(fx)]
        return _run_workers(corpus, a.cases, a.seed, a.case_timeout, extra)


def _fmt(v) -> str:
    return "-" if v is None else str(v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=200, help="cases per corpus (default 200)")
    ap.add_argument("--corpora", default=",".join(CORPORA),
                    help=f"comma-separated, of {', '.join(CORPORA)}")
    ap.add_argument("--seed", type=int, default=0, help="campaign seed (default 0)")
    ap.add_argument("--case-timeout", type=float, default=10.0,
                    help="a case running longer is a hang (default 10 s)")
    ap.add_argument("--full-budget", type=float, default=20.0,
                    help="seconds of full TVM imports in the tflite corpus (default 20)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--legit", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--extra", default="{}", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return _worker(a.worker, a.first, a.cases, a.seed, a.case_timeout, json.loads(a.extra))
    if a.child:
        r = _child(a.child, a)
        r["peak_mib"] = _peak_rss_mib()
        print("RESULT " + json.dumps(r))
        return 0
    if a.legit:
        _legit(a.legit)
        print("RESULT " + json.dumps({"peak_mib": _peak_rss_mib()}))
        return 0
    corpora = [c for c in a.corpora.split(",") if c]
    unknown = [c for c in corpora if c not in CORPORA]
    if unknown:
        ap.error(f"unknown corpus {unknown[0]!r}; known: {', '.join(CORPORA)}")
    rows = []
    for corpus in corpora:
        if corpus == "onnx":
            try:
                import onnx  # noqa: F401
            except ImportError:
                print("onnx: skipped (the onnx package is not installed)")
                continue
        t0 = time.perf_counter()
        r = _self("--child", corpus, "--cases", str(a.cases), "--seed", str(a.seed),
                  "--case-timeout", str(a.case_timeout), "--full-budget", str(a.full_budget))
        r["wall_s"] = time.perf_counter() - t0
        r["legit_mib"] = _self("--legit", corpus)["peak_mib"]
        rows.append((corpus, r))
        print(f"{corpus}: {r['cases']} cases in {r['wall_s']:.0f} s", file=sys.stderr)
    head = ("corpus", "cases", "accepted", "crashes", "hangs", "tracebacks", "wrong", "slowest s",
            "peak RSS MiB", "legit MiB", "ratio")
    table = [head]
    for corpus, r in rows:
        table.append((corpus, r["cases"], r["accepted"], r["crashes"], r["hangs"], r["tracebacks"],
                      _fmt(r["wrong"]),
                      "-" if r["slowest_s"] is None else f"{r['slowest_s']:.1f}",
                      f"{r['peak_mib']:.0f}", f"{r['legit_mib']:.0f}",
                      f"{r['peak_mib'] / r['legit_mib']:.2f}"))
    widths = [max(len(str(row[k])) for row in table) for k in range(len(head))]
    for n, row in enumerate(table):
        print("  ".join(str(v).rjust(w) if k else str(v).ljust(w)
                        for k, (v, w) in enumerate(zip(row, widths))))
        if n == 0:
            print("  ".join("-" * w for w in widths))
    print(f"(seed {a.seed}; a hang is a case over {a.case_timeout:g} s; '-': no oracle of "
          "that kind for the corpus, or no per-case time from its harness)")
    for corpus, r in rows:
        for e in r["examples"]:
            print(f"  {corpus}: {e}")
    bad = any(r["crashes"] or r["hangs"] or r["tracebacks"] or r["wrong"] for _, r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
