"""A pytest plugin that makes this machine look like an older CPU: run the tests as they would
run on it, ``TVM_ETHOS_TEST_CPU=haswell pytest -p tests.helpers.fake_cpu tests/...``.

The host's extensions (``tvm_ethos.runtime.host_cpu.host_features``) become those of the LLVM
CPU named, less any this machine lacks. Everything that asks which CPU it builds for follows:
the default host target switches the others off, tests pick their ``-mcpu`` among the CPUs
that one runs, and VNNI tests skip on a CPU without it. Extensions can only be taken away, so
the code built still runs here: what this shows is which paths the suite takes on that CPU.
"""
from __future__ import annotations

import os

ENV = "TVM_ETHOS_TEST_CPU"


def pytest_configure(config):
    mcpu = os.environ.get(ENV)
    if not mcpu:
        return
    from tests.helpers import host_cpu as helper
    from tvm_ethos.host.cpu import host_cpu as lower_cpu
    from tvm_ethos.runtime import host_cpu as rt_cpu

    real = rt_cpu.host_features()
    if real is None:
        raise RuntimeError(f"{ENV}: this machine's CPU extensions are unknown")
    if not lower_cpu.is_valid_cpu(mcpu):
        raise RuntimeError(f"{ENV}={mcpu}: not an LLVM CPU of this machine's architecture")
    fake = frozenset(real & set(lower_cpu.cpu_record({"kind": "llvm", "mcpu": mcpu}).features))
    for module in (rt_cpu, lower_cpu, helper):
        module.host_features = lambda: fake
    config.fake_cpu = (mcpu, fake)


def pytest_report_header(config):
    fake = getattr(config, "fake_cpu", None)
    if fake:
        return f"{ENV}: CPU extensions of {fake[0]}: {' '.join(sorted(fake[1]))}"
    return None
