"""The malformed-model fuzz harness: crash-isolated workers, a watchdog, saved reproducers.

The parent (:func:`run_campaign`, called by the tests and by ``benchmarks/fuzz_models.py``)
starts worker processes (``python -m tests.reliability.fuzz_harness worker ...``), each
running a contiguous range of case indices. A worker, for every case:

1. prints ``C <index>`` (its heartbeat), re-creates the case's bytes
   (:meth:`tflite_mutator.Corpus.case`), and feeds them to each target in-process under a
   per-case ``SIGALRM`` guard (:class:`CaseTimeout`, a ``BaseException`` so no ``except
   Exception`` in the code under test can swallow it);
2. classifies the outcome: ``ok`` (a graph / module came back), the class name of an expected
   error (a ``TvmEthosError`` subclass, ``PlannerError``), or a *violation*: any other
   exception, a timeout, or an expected error whose message is empty, multi-line or a
   traceback;
3. after the range, runs the cases that passed tvm-ethos' structural validation through the
   real TVM importer (``F <index>`` heartbeats) until its time budget is spent.

The worker ends with one ``R <json>`` line (counts by target and outcome, violations, timings).
A worker that dies (a signal: segfault, abort, the kernel's OOM killer) or stops printing
heartbeats for longer than the watchdog allows (a hang in C code, where ``SIGALRM`` cannot
reach) is recorded as a failure; the parent re-creates the offending case from its index,
saves it under ``save_dir`` and restarts a worker after it.

Workers run under ``RLIMIT_AS`` so that an absurd allocation fails as ``MemoryError`` inside
the worker instead of taking the machine's memory.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TARGETS = ("planner", "frontend")       # the cheap in-process targets of phase 1


class CaseTimeout(BaseException):
    """A case ran past its per-case time limit (raised by the SIGALRM handler)."""


class _Validated(BaseException):
    """Raised by the stand-in importer: tvm-ethos' validation accepted the model."""


# --------------------------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------------------------
def _template(msg: str) -> str:
    """A message with its numbers and quoted names blanked, to group errors by kind."""
    msg = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", msg)
    msg = re.sub(r"b'…'", "'…'", msg)
    msg = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", msg)
    msg = re.sub(r"\[[^\]]*\]", "[…]", msg)
    return msg[:120]


# Phrases of Python or TVM internals: an error that reads like this explains nothing to a user.
_INTERNAL = re.compile(
    r"object is not (iterable|subscriptable|callable)|object has no attribute|unpack_from|"
    r"bad number -?\d+ for type|(list|tuple) index out of range|'NoneType'|"
    r"(^|: )AssertionError$|(^|: )KeyError: -?\d+$|values to unpack|"
    r"Metadata omitted|show_meta|span=None")


def _message_problem(msg: str) -> str | None:
    if not msg.strip():
        return "empty error message"
    if "\n" in msg.strip():
        return "multi-line error message"
    if "Traceback" in msg or "InternalError" in msg or "Check failed" in msg:
        return "error message carries a raw traceback"
    if _INTERNAL.search(msg):
        return "error message is a raw Python / TVM internal error"
    return None


class Targets:
    """The functions under test, by name; each returns ``ok`` / ``validated`` or raises."""

    def __init__(self, names, tmpdir: str):
        self.names = list(names)
        self.tmpdir = tmpdir
        self.case_index = -1
        self.expected: dict[str, tuple[type, ...]] = {}
        for n in self.names:
            getattr(self, f"_setup_{n.replace('-', '_')}")()

    # planner.tflite.load_tflite --------------------------------------------------------------
    def _setup_planner(self):
        from planner.errors import PlannerError
        from planner.tflite import load_tflite
        self._load_tflite = load_tflite
        self.expected["planner"] = (PlannerError,)

    def planner(self, data: bytes) -> str:
        self._load_tflite(data)
        return "ok"

    # tvm_ethos.load_model up to (not including) TVM's converter ------------------------------
    def _setup_frontend(self):
        import tvm.relax.frontend.tflite as tfl_frontend

        from tvm_ethos.errors import TvmEthosError
        from tvm_ethos.frontend import load_model

        def stand_in(model, shape_dict=None, **_converter_options):  # op_converter=...
            raise _Validated()

        self._tfl_frontend = tfl_frontend
        self._real_from_tflite = tfl_frontend.from_tflite
        self._stand_in = stand_in
        self._load_model = load_model
        self.expected["frontend"] = (TvmEthosError,)
        self.expected["frontend-full"] = (TvmEthosError,)

    def frontend(self, data: bytes) -> str:
        self._tfl_frontend.from_tflite = self._stand_in
        try:
            self._load_model(data)
        except _Validated:
            return "validated"
        finally:
            self._tfl_frontend.from_tflite = self._real_from_tflite
        return "ok"

    def frontend_full(self, data: bytes) -> str:
        self._load_model(data)
        return "ok"

    # ONNX bytes through tvm_ethos.load_model (a file: bytes carry no ONNX magic) -------------
    def _setup_onnx(self):
        # TVM's importer is imported here, not by the first case under its alarm: an alarm
        # in the middle of TVM's import leaves it half-initialised for every later case
        import onnx  # noqa: F401  (the test skips when it is missing)
        import tvm.relax.frontend.onnx  # noqa: F401

        from tvm_ethos.errors import TvmEthosError
        from tvm_ethos.frontend import load_model
        self._load_model = load_model
        self.expected["onnx"] = (TvmEthosError,)

    def onnx(self, data: bytes) -> str:
        p = os.path.join(self.tmpdir, "case.onnx")
        with open(p, "wb") as f:
            f.write(data)
        self._load_model(p)
        return "ok"

    # compiled-model packages: tvm_ethos.load, and compile's cache (package_mutator.py) ------
    def _setup_package(self):
        if getattr(self, "_packages", None) is None:
            from tests.reliability.package_mutator import PackageTarget
            self._packages = PackageTarget(self.tmpdir)
        self.expected["package"] = self._packages.expected

    def package(self, data: bytes) -> str:
        return self._packages.package(data)

    def _setup_cache(self):
        self._setup_package()
        self._packages.setup_cache()
        self.expected["cache"] = self._packages.expected

    def cache(self, data: bytes) -> str:
        return self._packages.cache(data)

    # the harness' own test: misbehave on one case ------------------------------------------
    def _setup_selftest(self):
        self.expected["selftest"] = (ValueError,)
        mode, _, index = os.environ.get("TVM_ETHOS_FUZZ_SELFTEST", "none:-1").partition(":")
        self._selftest = (mode, int(index))

    def selftest(self, data: bytes) -> str:
        mode, index = self._selftest
        if self.case_index != index:
            return "ok"
        if mode == "crash":                   # a segfault, as a bad C extension would cause
            import ctypes
            ctypes.string_at(0)
        elif mode == "hang":
            # stuck in C: SIGALRM is blocked, only the parent can act
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)
        elif mode == "slow":                  # stuck in Python: the in-process guard fires
            time.sleep(3600)
        elif mode == "raw":
            raise IndexError("list index out of range")
        elif mode == "unclear":
            raise ValueError("'NoneType' object is not subscriptable")
        return "ok"

    def run(self, name: str, data: bytes, timeout: float) -> tuple[str, str | None, str | None]:
        """(outcome, message template, violation text or None)."""
        fn = getattr(self, name.replace("-", "_"))
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            outcome = fn(data)
            return outcome, None, None
        except CaseTimeout:
            return "TIMEOUT", None, f"{name}: no result after {timeout} s (hang)"
        except self.expected[name] as e:
            msg = str(e)
            problem = _message_problem(msg)
            if problem:
                return type(e).__name__, _template(msg), f"{name}: {problem}: {msg[:500]!r}"
            return type(e).__name__, _template(msg), None
        except BaseException as e:  # noqa: BLE001 - everything else is what we are looking for
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            tb = traceback.extract_tb(e.__traceback__)
            where = "; ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in tb[-3:])
            return (f"RAW {type(e).__name__}", _template(str(e)),
                    f"{name}: raw {type(e).__name__}: {str(e)[:300]!r} at {where}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


def _on_alarm(signum, frame):
    raise CaseTimeout()


def _limit_memory(mb: int) -> None:
    if mb <= 0:
        return
    import resource
    lim = mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


def _corpus(kind: str, long: bool):
    from tests.reliability import tflite_mutator as tm
    if kind == "onnx":
        from tests.reliability.onnx_seeds import onnx_corpus
        return onnx_corpus()
    if kind == "package":
        from tests.reliability.package_mutator import package_corpus
        return package_corpus()
    return tm.Corpus.default(long=long)


def worker_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="fuzz_harness worker")
    ap.add_argument("--corpus", default="tflite", choices=["tflite", "onnx", "package"])
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--campaign", type=int, required=True)
    ap.add_argument("--start", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--case-timeout", type=float, default=5.0)
    ap.add_argument("--full-timeout", type=float, default=60.0)
    ap.add_argument("--full-budget", type=float, default=0.0,
                    help="seconds of full TVM imports of validated cases after the range")
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="stop taking new cases after this many seconds (0: no limit)")
    ap.add_argument("--mem-mb", type=int, default=3072)
    ap.add_argument("--tmpdir", default=None, help="scratch files (default: a new temp dir)")
    a = ap.parse_args(argv)

    import faulthandler
    faulthandler.enable()              # a segfault prints the Python stack to stderr
    # The protocol gets its own copy of stdout; fd 1 itself goes to stderr, so whatever the
    # code under test prints (TVM's importers do) cannot break a heartbeat line.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _limit_memory(a.mem_mb)
    signal.signal(signal.SIGALRM, _on_alarm)
    t_setup = time.perf_counter()
    corpus = _corpus(a.corpus, a.long)
    if a.tmpdir:
        tmp = a.tmpdir
        os.makedirs(tmp, exist_ok=True)
    else:
        import atexit
        import shutil
        tmp = tempfile.mkdtemp(prefix="tvm_ethos_fuzz_")
        atexit.register(shutil.rmtree, tmp, True)
    targets = Targets([t for t in a.targets.split(",") if t], tmp)
    setup_s = time.perf_counter() - t_setup
    counts: dict[str, Counter] = defaultdict(Counter)
    by_mutator: dict[str, Counter] = defaultdict(Counter)
    templates: dict[str, Counter] = defaultdict(Counter)
    violations = []
    validated = []
    t0 = time.perf_counter()
    done = 0
    for i in range(a.start, a.start + a.count):
        if a.deadline and time.perf_counter() - t0 > a.deadline:
            break
        out.write(f"C {i}\n")
        out.flush()
        data, desc = corpus.case(a.campaign, i)
        targets.case_index = i
        mut = desc.split(": ", 2)[1] if ": " in desc else "none"
        for name in targets.names:
            outcome, tmpl, violation = targets.run(name, data, a.case_timeout)
            counts[name][outcome] += 1
            by_mutator[f"{name}:{mut}"][outcome] += 1
            if tmpl:
                templates[name][f"{outcome}: {tmpl}"] += 1
            if violation:
                violations.append({"index": i, "case": desc, "problem": violation})
            if name == "frontend" and outcome == "validated":
                validated.append((len(data), i))
        done += 1
    phase1_s = time.perf_counter() - t0
    result = {
        "cases": done, "setup_s": setup_s, "phase1_s": phase1_s, "validated": len(validated),
        "counts": {k: dict(v) for k, v in counts.items()},
        "by_mutator": {k: dict(v) for k, v in by_mutator.items()},
        "templates": {k: dict(v.most_common(40)) for k, v in templates.items()},
        "violations": violations[:200], "n_violations": len(violations),
    }
    out.write("R " + json.dumps(result) + "\n")
    out.flush()
    # phase 2: the validated cases through TVM's real importer, until the budget is spent
    if a.full_budget <= 0 or "frontend" not in targets.names:
        return 0
    counts, templates, violations = defaultdict(Counter), defaultdict(Counter), []
    full_done = 0
    t1 = time.perf_counter()
    for _, i in validated:                      # case order: random over the seeds
        if time.perf_counter() - t1 > a.full_budget:
            break
        out.write(f"F {i}\n")
        out.flush()
        data, desc = corpus.case(a.campaign, i)
        outcome, tmpl, violation = targets.run("frontend-full", data, a.full_timeout)
        counts["frontend-full"][outcome] += 1
        if tmpl:
            templates["frontend-full"][f"{outcome}: {tmpl}"] += 1
        if violation:
            violations.append({"index": i, "case": desc, "problem": violation})
        full_done += 1
    result = {
        "full_cases": full_done, "full_s": time.perf_counter() - t1,
        "counts": {k: dict(v) for k, v in counts.items()},
        "templates": {k: dict(v.most_common(40)) for k, v in templates.items()},
        "violations": violations[:200], "n_violations": len(violations),
    }
    out.write("Q " + json.dumps(result) + "\n")
    out.flush()
    return 0


# --------------------------------------------------------------------------------------------
# parent side
# --------------------------------------------------------------------------------------------
@dataclass
class Failure:
    kind: str               # "crash", "hang", "violation"
    index: int
    case: str
    detail: str
    saved: str | None = None


@dataclass
class CampaignReport:
    campaign: int
    requested: int
    cases: int = 0
    full_cases: int = 0
    validated: int = 0
    wall_s: float = 0.0
    counts: dict = field(default_factory=lambda: defaultdict(Counter))
    by_mutator: dict = field(default_factory=lambda: defaultdict(Counter))
    templates: dict = field(default_factory=lambda: defaultdict(Counter))
    failures: list = field(default_factory=list)
    n_violations: int = 0
    worker_s: dict = field(default_factory=lambda: Counter())

    def merge(self, r: dict) -> None:
        self.cases += r.get("cases", 0)
        self.full_cases += r.get("full_cases", 0)
        self.validated += r.get("validated", 0)
        self.n_violations += r["n_violations"]
        for k in ("setup_s", "phase1_s", "full_s"):
            self.worker_s[k] += r.get(k, 0.0)
        for dst, src in ((self.counts, r["counts"]), (self.by_mutator, r.get("by_mutator", {})),
                         (self.templates, r["templates"])):
            for k, v in src.items():
                dst[k].update(v)
        for v in r["violations"]:
            self.failures.append(Failure("violation", v["index"], v["case"], v["problem"]))

    def summary(self) -> str:
        lines = [f"campaign {self.campaign}: {self.cases} cases in {self.wall_s:.1f} s wall "
                 f"({self.cases / max(self.wall_s, 1e-9):.0f} cases/s); "
                 f"{self.validated} passed tvm-ethos validation, {self.full_cases} of them "
                 f"through the full TVM import; {len(self.failures)} failures"]
        for target, c in sorted(self.counts.items()):
            parts = ", ".join(f"{k} {v}" for k, v in c.most_common())
            lines.append(f"  {target:14s} {parts}")
        for f in self.failures[:20]:
            lines.append(f"  FAIL {f.kind} case {f.index} ({f.case}): {f.detail}"
                         + (f" [saved {f.saved}]" if f.saved else ""))
        return "\n".join(lines)


def _env() -> dict:
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "tests" / "tvm_ethos")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TVM_NUM_THREADS", "1")
    return env


class _Worker:
    def __init__(self, args: list[str], start: int, end: int, log_dir: str, wid: int):
        self.start, self.end, self.wid = start, end, wid
        self.args = args
        self.current: tuple[str, int] | None = None
        self.last_beat = time.monotonic()
        self.results: list[dict] = []
        self.started = 0
        self.buf = b""
        self.stderr_path = os.path.join(log_dir, f"worker{wid}-{start}.stderr")
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.fuzz_harness", "worker", *args,
             "--start", str(start), "--count", str(end - start),
             "--tmpdir", os.path.join(log_dir, f"tmp{wid}-{start}")],
            stdout=subprocess.PIPE, stderr=self.stderr, cwd=ROOT, env=_env())

    def stderr_tail(self, n: int = 1500) -> str:
        self.stderr.flush()
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            text = line.decode("utf-8", "replace")
            self.last_beat = time.monotonic()
            if text.startswith("C ") or text.startswith("F "):
                self.current = (text[0], int(text[2:]))
                self.started += text[0] == "C"
            elif text.startswith("R ") or text.startswith("Q "):
                self.results.append(json.loads(text[2:]))
                self.current = None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        self.kill()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.stderr.close()


def _save(save_dir: str | None, corpus, campaign: int, index: int, kind: str, desc: str,
          detail: str) -> str | None:
    if not save_dir:
        return None
    os.makedirs(save_dir, exist_ok=True)
    data, _ = corpus.case(campaign, index)
    base = os.path.join(save_dir, f"{kind}-c{campaign}-i{index}")
    ext = {"onnx": ".onnx", "package": ".pkg"}.get(getattr(corpus, "kind", "tflite"), ".tflite")
    with open(base + ext, "wb") as f:
        f.write(data)
    with open(base + ".txt", "w") as f:
        f.write(f"campaign {campaign} case {index}\n{desc}\n{detail}\n")
    return base + ext


def run_campaign(n_cases: int, *, campaign: int = 0, workers: int = 2, corpus: str = "tflite",
                 targets: str = ",".join(TARGETS), case_timeout: float = 5.0,
                 full_timeout: float = 60.0, full_budget: float = 0.0, deadline: float = 0.0,
                 watchdog: float = 30.0, mem_mb: int = 3072, save_dir: str | None = None,
                 long: bool = False, first: int = 0, max_restarts: int = 20,
                 startup: float = 180.0, extra_args: tuple[str, ...] = ()) -> CampaignReport:
    """Run cases ``first .. first + n_cases`` of ``campaign`` on ``workers`` processes.

    ``watchdog``: seconds without a heartbeat after which a worker is killed as hung (it must
    exceed ``case_timeout`` and ``full_timeout``, which the worker enforces itself);
    ``startup``: the same before a worker's first heartbeat (imports, building the corpus).
    """
    report = CampaignReport(campaign, n_cases)
    log_dir = tempfile.mkdtemp(prefix="tvm_ethos_fuzzlog_")
    base_args = ["--corpus", corpus, "--campaign", str(campaign), "--targets", targets,
                 "--case-timeout", str(case_timeout), "--full-timeout", str(full_timeout),
                 "--full-budget", str(full_budget / max(workers, 1)), "--deadline", str(deadline),
                 "--mem-mb", str(mem_mb), *(["--long"] if long else []), *extra_args]
    watchdog = max(watchdog, case_timeout + 2, (full_timeout + 5) if full_budget else 0)
    bounds = [first + n_cases * k // workers for k in range(workers + 1)]
    live = [_Worker(base_args, bounds[k], bounds[k + 1], log_dir, k)
            for k in range(workers) if bounds[k + 1] > bounds[k]]
    local_corpus = None
    restarts = 0
    t0 = time.perf_counter()
    while live:
        fds = {w.proc.stdout.fileno(): w for w in live}
        ready, _, _ = select.select(list(fds), [], [], 1.0)
        for fd in ready:
            w = fds[fd]
            chunk = os.read(fd, 65536)
            if chunk:
                w.feed(chunk)
                continue
            # EOF: the worker ended
            rc = w.proc.wait()
            for r in w.results:
                report.merge(r)
            live.remove(w)
            if rc == 0 and w.results:
                w.close()
                continue
            detail = (f"worker died with {'signal ' + str(-rc) if rc < 0 else 'exit ' + str(rc)}"
                      f"; stderr tail: {w.stderr_tail()!r}")
            w.close()
            restarts += 1
            if w.current is None:
                report.failures.append(Failure("crash", -1, "(before the first case)", detail))
                continue
            local_corpus = local_corpus or _corpus(corpus, long)
            _record(report, local_corpus, campaign, w, "crash", detail, save_dir)
            if restarts <= max_restarts and w.current[0] == "C" and w.current[1] + 1 < w.end:
                live.append(_Worker(base_args, w.current[1] + 1, w.end, log_dir, w.wid))
        now = time.monotonic()
        for w in list(live):
            limit = watchdog if w.current is not None or w.results else startup
            if now - w.last_beat > limit:
                live.remove(w)
                w.kill()
                for r in w.results:
                    report.merge(r)
                detail = (f"no heartbeat for {limit:.0f} s (hang); stderr tail: "
                          f"{w.stderr_tail()!r}")
                w.close()
                restarts += 1
                if w.current is None:
                    report.failures.append(Failure("hang", -1, "(start-up)", detail))
                    continue
                local_corpus = local_corpus or _corpus(corpus, long)
                _record(report, local_corpus, campaign, w, "hang", detail, save_dir)
                if restarts <= max_restarts and w.current[0] == "C" and w.current[1] + 1 < w.end:
                    live.append(_Worker(base_args, w.current[1] + 1, w.end, log_dir, w.wid))
    report.wall_s = time.perf_counter() - t0
    import shutil
    shutil.rmtree(log_dir, ignore_errors=True)      # what mattered is in the failures' details
    for f in report.failures:
        if f.kind == "violation" and f.saved is None and save_dir:
            local_corpus = local_corpus or _corpus(corpus, long)
            f.saved = _save(save_dir, local_corpus, campaign, f.index, "violation", f.case,
                            f.detail)
    return report


def _record(report, corpus, campaign, w, kind, detail, save_dir):
    phase, index = w.current
    if not w.results:                  # the cases it finished before this one, unreported
        report.cases += w.started - 1
    _, desc = corpus.case(campaign, index)
    saved = _save(save_dir, corpus, campaign, index, kind, desc, detail)
    report.failures.append(Failure(kind, index, desc + (" [full import]" if phase == "F" else ""),
                                   detail, saved))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2:]))
    print("usage: python -m tests.reliability.fuzz_harness worker ...", file=sys.stderr)
    sys.exit(2)
