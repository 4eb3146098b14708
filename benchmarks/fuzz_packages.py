"""Packages and cache entries under fire (issue 25): the long fuzz run, and the memory table.

    python benchmarks/fuzz_packages.py --cases 20000 [--campaign 7] [--workers 2]
    python benchmarks/fuzz_packages.py --memory

The default mode runs the CI campaign of tests/reliability/test_packages.py (the mutation corpus
of tests/reliability/package_mutator.py through ``tvm_ethos.load`` and ``compile``'s cache, in
the crash-isolated harness, 10 s a case) on more cases, and prints the outcomes per mutator.
Failures are saved under ``--save``; the exit status is 1 when any case failed.

``--memory`` loads the intact seed package and the hostile files of issue 25 (a zip whose
unused member inflates to 3 GiB, a tar with a 3 GiB sparse member, a tar whose library is cut
in half) each in a fresh process, and prints the peak RSS each load added to that of a process
that imported tvm_ethos (and the peak itself), with how the load ended.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "tvm_ethos")]

_CHILD = r"""
import json, resource, sys
import tvm_ethos
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    tvm_ethos.load(sys.argv[1]).unload()
    outcome = "loaded"
except tvm_ethos.TvmEthosError as err:
    outcome = type(err).__name__ + ": " + str(err).split(": ", 1)[1][:70]
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"added_kib": after - before, "peak_kib": after, "outcome": outcome}))
"""


def _zip_with_unused_member(seed: bytes, inflated: int) -> bytes:
    """The seed's members plus ``unused.bin``: ``inflated`` zero bytes, deflated."""
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(seed)) as src, zipfile.ZipFile(buf, "w") as z:
        for info in src.infolist():
            z.writestr(info, src.read(info))
        info = zipfile.ZipInfo("unused.bin", date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            chunk = bytes(1 << 24)
            for _ in range(inflated // len(chunk)):
                f.write(chunk)
    return buf.getvalue()


def _sparse_tar(seed: bytes, real_size: int) -> bytes:
    """The seed tar with model.so a GNU sparse file of ``real_size`` bytes."""
    with tarfile.open(fileobj=io.BytesIO(seed)) as t:
        m = t.getmember("model.so")
    h = bytearray(seed[m.offset:m.offset + tarfile.BLOCKSIZE])
    h[156:157] = tarfile.GNUTYPE_SPARSE
    h[257:265] = tarfile.GNU_MAGIC
    h[386:398] = b"%011o\0" % 0
    h[398:410] = b"%011o\0" % m.size
    h[483:495] = b"%011o\0" % real_size
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return seed[:m.offset] + bytes(h) + seed[m.offset + tarfile.BLOCKSIZE:]


def memory_table(seeds: Path) -> None:
    seed_zip = (seeds / "seed.tvmethos").read_bytes()
    seed_tar = (seeds / "seed.tar").read_bytes()
    with tarfile.open(fileobj=io.BytesIO(seed_tar)) as t:
        so = t.getmember("model.so")
    t0 = time.perf_counter()
    cases = {
        "intact zip (seed)": seed_zip,
        "intact tar (seed)": seed_tar,
        "zip + unused member inflating to 3 GiB": _zip_with_unused_member(seed_zip, 3 << 30),
        "tar with a 3 GiB sparse model.so": _sparse_tar(seed_tar, 3 << 30),
        "tar, model.so cut in half": seed_tar[:so.offset_data + so.size // 2],
    }
    print(f"(hostile files built in {time.perf_counter() - t0:.1f} s)")
    print(f"{'package':42s} {'file size':>12s} {'peak RSS':>12s} {'added by load':>14s}  outcome")
    with tempfile.TemporaryDirectory() as d:
        for name, data in cases.items():
            path = os.path.join(d, "case.bin")
            with open(path, "wb") as f:
                f.write(data)
            res = subprocess.run([sys.executable, "-c", _CHILD, path], capture_output=True,
                                 text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            if res.returncode != 0:
                print(f"{name:42s} {len(data):>12,} {'':>27s}  DIED rc {res.returncode}: "
                      f"{res.stderr[-200:]!r}")
                continue
            r = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{name:42s} {len(data):>12,} {r['peak_kib']:>8,} KiB {r['added_kib']:>10,} KiB  "
                  f"{r['outcome']}")


def fuzz(a, seeds: Path) -> int:
    from tests.reliability.fuzz_harness import run_campaign
    from tests.reliability.package_mutator import SEEDS_ENV

    os.environ[SEEDS_ENV] = str(seeds)
    campaign = a.campaign if a.campaign is not None else int(time.time()) % 100000
    save = os.path.join(a.save, f"package-c{campaign}")
    report = run_campaign(a.cases, campaign=campaign, workers=a.workers, corpus="package",
                          targets="package,cache", case_timeout=10.0, save_dir=save)
    print(report.summary())
    print(f"\n{'target:mutator':32s} outcomes")
    for key, outcomes in sorted(report.by_mutator.items()):
        print(f"{key:32s} " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    return 1 if report.failures else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--campaign", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--save", default=str(ROOT / "out" / "fuzz-failures"))
    ap.add_argument("--memory", action="store_true", help="print the memory table instead")
    a = ap.parse_args(argv)
    from tests.reliability.package_mutator import make_seeds

    with tempfile.TemporaryDirectory() as d:
        seeds = Path(make_seeds(d))
        if a.memory:
            memory_table(seeds)
            return 0
        return fuzz(a, seeds)


if __name__ == "__main__":
    sys.exit(main())
