"""The llvm target the host kernels are built for, and the CPU record it gives a package.

By default the compiling machine's CPU (LLVM's name for it) with every recorded x86 extension
that this machine's kernel does not list switched off (``-mattr=-avx512f,...``): LLVM names the
CPU from its model number, and a virtual machine may hide some of that model's extensions, so
the name alone can give code this very machine cannot run. ``compile(target="llvm
-mcpu=haswell")`` builds for the named CPU instead (:func:`building_for`), e.g. for an older
machine the model is deployed on. :func:`cpu_record` is what the code may use:
``tvm_ethos.runtime.host_cpu`` checks it where the model is loaded (rfcs/0006-reliability.md).
"""
from __future__ import annotations

import contextlib
import contextvars

import tvm
from tvm.target import codegen

from tvm_ethos.runtime.host_cpu import X86_FLAGS, CpuRecord, host_features

_MCPU: contextvars.ContextVar[str | None] = contextvars.ContextVar("tvm_ethos_mcpu", default=None)


def is_valid_cpu(mcpu: str) -> bool:
    """Whether LLVM knows ``mcpu`` as a CPU of this machine's architecture."""
    if not isinstance(mcpu, str) or not mcpu or mcpu.strip() != mcpu:
        return False
    triple = str(codegen.llvm_get_system_triple())
    return bool(codegen.llvm_is_valid_cpu(mcpu, triple))


def system_target() -> dict:
    """This machine's llvm target: its CPU, less the extensions its kernel does not list."""
    target = {"kind": "llvm", "mcpu": str(codegen.llvm_get_system_cpu())}
    host = host_features()
    if host is not None:
        off = [f"-{f}" for f in target_features(target) if f not in host]
        if off:
            target["mattr"] = off
    return target


def current_target() -> dict:
    """The llvm target host kernels are built for now: the CPU :func:`building_for` names,
    else this machine's."""
    mcpu = _MCPU.get()
    return {"kind": "llvm", "mcpu": mcpu} if mcpu else system_target()


@contextlib.contextmanager
def building_for(mcpu: str | None):
    """Build the host kernels for the LLVM CPU ``mcpu`` inside the block (None or ``""``:
    this machine's)."""
    token = _MCPU.set(mcpu or None)
    try:
        yield
    finally:
        _MCPU.reset(token)


def target_features(target) -> tuple[str, ...]:
    """The recorded x86 extensions (``X86_FLAGS``) the llvm ``target``'s code may use, sorted;
    none for a target of another architecture."""
    tgt = tvm.target.Target(target)
    if tgt.kind.name != "llvm" or not target_arch(tgt).startswith("x86"):
        return ()
    feats = {str(f) for f in codegen.llvm_get_cpu_features(tgt)}
    return tuple(sorted(f for f in X86_FLAGS if f in feats))


def target_arch(target) -> str:
    """The architecture of the llvm ``target`` (its triple's first part, ``x86_64``)."""
    tgt = tvm.target.Target(target)
    triple = str(tgt.attrs.get("mtriple", "") or codegen.llvm_get_system_triple())
    return triple.split("-")[0]


def cpu_record(target) -> CpuRecord:
    """What code built for the llvm ``target`` needs of the CPU that runs it."""
    tgt = tvm.target.Target(target)
    mcpu = str(tgt.attrs.get("mcpu", "") or "generic")
    return CpuRecord(target_arch(tgt), mcpu, target_features(tgt))
