"""Which LLVM CPU a test may build host kernels for and still run them here.

A test that forces an ``-mcpu`` (to cover the AVX2 kernels on an AVX-512 machine, say) must
pick one whose extensions this machine has: CI machines change CPU from one run to the next
(AMD Zen 3 and 4, Intel Cascade Lake, AVX2-only Xeons), and code for an extension the host
lacks dies with SIGILL, taking the whole pytest process with it."""
from __future__ import annotations

import pytest

from tvm_ethos.host.cpu.host_cpu import cpu_record, is_valid_cpu
from tvm_ethos.runtime.host_cpu import host_features, missing_features

#: the CPUs tests choose among, newest first (x86-64 levels last: any x86 machine has one)
CANDIDATES = ("znver4", "sapphirerapids", "icelake-server", "cascadelake", "skylake-avx512",
              "znver3", "znver2", "haswell", "x86-64-v4", "x86-64-v3", "x86-64-v2")


def runs_here(mcpu: str, host: frozenset[str] | None = None) -> bool:
    """Whether code built for ``mcpu`` can run on this machine (``host``: on a CPU with these
    extensions)."""
    host = host_features() if host is None else host
    if host is None or not is_valid_cpu(mcpu):
        return False
    return not missing_features(cpu_record({"kind": "llvm", "mcpu": mcpu}), host)


def runnable_mcpu(has=(), lacks=(), candidates=CANDIDATES, host=None) -> str | None:
    """The first of ``candidates`` that runs here (``host``: as :func:`runs_here`), has every
    extension of ``has`` and none of ``lacks`` (LLVM's names), or None."""
    for mcpu in candidates:
        if not runs_here(mcpu, host):
            continue
        feats = cpu_record({"kind": "llvm", "mcpu": mcpu}).features
        if all(f in feats for f in has) and not any(f in feats for f in lacks):
            return mcpu
    return None


def mcpu_or_skip(has=(), lacks=(), candidates=CANDIDATES) -> str:
    """:func:`runnable_mcpu`, or skip the test saying which CPU it needed."""
    mcpu = runnable_mcpu(has, lacks, candidates)
    if mcpu is None:
        want = ", ".join([f"with {f}" for f in has] + [f"without {f}" for f in lacks])
        pytest.skip(f"no CPU {want} among {', '.join(candidates)} runs on this machine "
                    f"(its extensions: {' '.join(sorted(host_features() or ())) or 'unknown'})")
    return mcpu


def target_or_skip(has=(), lacks=()) -> dict:
    """The llvm target of :func:`mcpu_or_skip`."""
    return {"kind": "llvm", "mcpu": mcpu_or_skip(has, lacks)}
