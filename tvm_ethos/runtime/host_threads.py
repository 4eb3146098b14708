"""How many threads the host (llvm) kernels' parallel loops get.

TVM's thread pool takes ``TVM_NUM_THREADS`` (or ``OMP_NUM_THREADS``) and, without either, half
of ``std::thread::hardware_concurrency()`` on x86, assuming two hyper-threads per core. On a
CPU or VM without SMT that is half the cores: on a 2-core machine, one thread, so every
``parallel`` loop of ``cpu_schedule`` ran on the calling thread alone. :func:`default_threads`
sets ``TVM_NUM_THREADS`` to the number of physical cores this process may run on (the CPUs of
its affinity mask, hyper-thread siblings counted once, from Linux's sysfs topology) when the
user set neither variable. TVM reads the variable when a thread first launches a parallel
loop, so this runs at ``import tvm_ethos``, before any kernel.
"""
from __future__ import annotations

import os
from pathlib import Path

_SYS_CPU = Path("/sys/devices/system/cpu")


def physical_cores(cpus=None, sys_cpu: Path = _SYS_CPU) -> int:
    """Cores among ``cpus`` (default: this process's affinity mask) counting each set of
    hyper-thread siblings once; a CPU whose topology is unreadable counts as one core."""
    if cpus is None:
        try:
            cpus = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            return max(os.cpu_count() or 1, 1) // 2 or 1  # TVM's own guess
    cores = set()
    for cpu in cpus:
        try:
            cores.add((sys_cpu / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text()
                      .strip())
        except OSError:
            cores.add(f"cpu{cpu}")
    return max(len(cores), 1)


def default_threads(environ=None) -> None:
    """``TVM_NUM_THREADS`` = :func:`physical_cores`, unless ``TVM_NUM_THREADS`` or
    ``OMP_NUM_THREADS`` is set already (the user's choice stands)."""
    env = os.environ if environ is None else environ
    if "TVM_NUM_THREADS" in env or "OMP_NUM_THREADS" in env:
        return
    env["TVM_NUM_THREADS"] = str(physical_cores())
