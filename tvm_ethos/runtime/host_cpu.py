"""The CPU a compiled model's host code needs, and whether this machine's CPU is one.

Host kernels are native code built by LLVM for one CPU (``-mcpu``, by default the compiling
machine's): run on a CPU without one of the instruction-set extensions it was built with
(AVX-512 VNNI code on an AVX2-only Xeon), the process dies with SIGILL. So a package and a
cache entry carry a *CPU record* (:class:`CpuRecord`: the architecture and the extensions the
code may use, in LLVM's names), and loading one on a CPU that lacks any of them is one
:class:`HostCpuError` naming what is missing and how to rebuild, raised before the shared
library is loaded (rfcs/0006-reliability.md).

Only extensions that change which instructions code may contain are recorded (``X86_FLAGS``);
tuning flags and system instructions (``pku``, ``shstk``, ``wbnoinvd``: a virtual machine often
hides them, and compiled kernels never use them) are left out. The host's extensions are read
from ``/proc/cpuinfo`` (the kernel's view, which follows what a hypervisor hides), not from the
CPU's model name. No TVM here: the runtime loads packages without it (rfcs/0003); what an llvm
target needs is worked out in ``tvm_ethos.host.cpu.host_cpu``.
"""
from __future__ import annotations

import functools
import platform
from typing import NamedTuple

from tvm_ethos.errors import ModelLoadError

#: LLVM's name of an x86 extension -> the flag Linux lists for it in /proc/cpuinfo
X86_FLAGS = {
    "mmx": "mmx", "sse": "sse", "sse2": "sse2", "sse3": "pni", "ssse3": "ssse3",
    "sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse4a": "sse4a", "cmov": "cmov", "cx16": "cx16",
    "sahf": "lahf_lm", "popcnt": "popcnt", "lzcnt": "abm", "bmi": "bmi1", "bmi2": "bmi2",
    "movbe": "movbe", "adx": "adx", "aes": "aes", "pclmul": "pclmulqdq", "sha": "sha_ni",
    "f16c": "f16c", "fma": "fma", "fma4": "fma4", "xop": "xop", "tbm": "tbm",
    "avx": "avx", "avx2": "avx2", "avxvnni": "avx_vnni", "gfni": "gfni", "vaes": "vaes",
    "vpclmulqdq": "vpclmulqdq", "avx512f": "avx512f", "avx512cd": "avx512cd",
    "avx512dq": "avx512dq", "avx512bw": "avx512bw", "avx512vl": "avx512vl",
    "avx512ifma": "avx512ifma", "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2",
    "avx512vnni": "avx512_vnni", "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq", "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16",
}
#: the x86-64 micro-architecture levels (the psABI's), from the newest: what an error suggests
#: rebuilding for, each with the extensions it adds to the level below
X86_LEVELS = (
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
    ("x86-64-v3", ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe")),
    ("x86-64-v2", ("cx16", "sahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3")),
    ("x86-64", ("cmov", "mmx", "sse", "sse2")),
)
_CPUINFO = "/proc/cpuinfo"
_X86_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "i686": "x86", "i386": "x86"}


class HostCpuError(ModelLoadError):
    """A compiled model whose host code needs CPU extensions this machine lacks."""


class CpuRecord(NamedTuple):
    """What a compiled model's host code needs: the architecture (``"x86_64"``), the ``-mcpu``
    it was built for, and the extensions (LLVM's names, sorted) its code may use."""

    arch: str
    mcpu: str
    features: tuple[str, ...]

    def to_json(self) -> dict:
        return {"arch": self.arch, "mcpu": self.mcpu, "features": list(self.features)}

    @classmethod
    def from_json(cls, data) -> CpuRecord:
        """The record of a package's metadata (ModelLoadError for a malformed one)."""
        try:
            feats = data["features"]
            if not (isinstance(data["arch"], str) and isinstance(data["mcpu"], str)
                    and isinstance(feats, list) and all(isinstance(f, str) for f in feats)):
                raise TypeError("a field of the wrong type")
            return cls(data["arch"], data["mcpu"], tuple(sorted(feats)))
        except (KeyError, TypeError, AttributeError) as err:
            raise ModelLoadError(f"malformed host CPU record {data!r} ({err}); compile the "
                                 "model again") from None


def read_cpu_record(meta: dict, path: str) -> CpuRecord | None:
    """The CPU record of a package's metadata, or None for a package written before packages
    carried one (not checked); ModelLoadError naming ``path`` for a malformed one."""
    data = meta.get("host_cpu")
    if data is None:
        return None
    try:
        return CpuRecord.from_json(data)
    except ModelLoadError as err:
        raise ModelLoadError(f"{path}: {err}") from None


def parse_cpuinfo(text: str) -> frozenset[str]:
    """The extensions (LLVM's names) of the first processor's ``flags`` line of a
    /proc/cpuinfo text (empty when it has none)."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            flags = set(value.split())
            return frozenset(name for name, flag in X86_FLAGS.items() if flag in flags)
    return frozenset()


def host_arch() -> str:
    """This machine's architecture as a record names it (``x86_64``, else Python's name)."""
    machine = platform.machine().lower()
    return _X86_MACHINES.get(machine, machine)


@functools.lru_cache(maxsize=1)
def host_features() -> frozenset[str] | None:
    """The x86 extensions of this machine's CPU (LLVM's names), or None where they cannot be
    read (not x86, or no /proc/cpuinfo): then no record can be checked."""
    if not host_arch().startswith("x86"):
        return None
    try:
        with open(_CPUINFO, encoding="ascii", errors="replace") as f:
            feats = parse_cpuinfo(f.read())
    except OSError:
        return None
    return feats or None


def x86_level(features) -> str | None:
    """The newest x86-64 level whose extensions are all in ``features`` (None: not even the
    baseline)."""
    have = set(features)
    for i, (name, _added) in enumerate(X86_LEVELS):
        if all(f in have for _n, added in X86_LEVELS[i:] for f in added):
            return name
    return None


def missing_features(record: CpuRecord, host: frozenset[str] | None) -> tuple[str, ...]:
    """The record's extensions ``host`` lacks (none when the host's are unknown)."""
    if host is None:
        return ()
    return tuple(f for f in record.features if f not in host)


def check_host_cpu(record: CpuRecord | None, what: str, arch: str | None = None,
                   host: frozenset[str] | None = None) -> None:
    """HostCpuError unless this machine (``arch`` / ``host``: this one's when None) can run
    code built for ``record``; ``what`` names the package in the message. A model without a
    record (an older package) is not checked."""
    if record is None:
        return
    arch = host_arch() if arch is None else arch
    if record.arch != arch:
        raise HostCpuError(
            f"{what}: its host code is for {record.arch} (-mcpu={record.mcpu}) and this machine "
            f"is {arch}; compile the model again on this machine")
    host = host_features() if host is None else host
    missing = missing_features(record, host)
    if missing:
        level = x86_level(host) or "<cpu>"
        raise HostCpuError(
            f"{what}: its host code was built for -mcpu={record.mcpu} and needs CPU features "
            f"this CPU lacks: {', '.join(missing)}; compile the model again on this machine, or "
            f"for a CPU it has, e.g. --target \"llvm -mcpu={level}\"")
