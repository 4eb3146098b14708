"""The executor's options and the one rule that checks them.

``compile``, ``load``, the executor itself and the ``fallback_memory`` planner all take these
options; each calls :func:`check_runtime_options`, so a bad value gets the same
:class:`~tvm_ethos.errors.OptionError` wherever it enters. Imports nothing heavy: the CLI reads
the allowed values from here before TVM is loaded.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tvm_ethos.errors import OptionError

__all__ = ["RUNTIME_OPTIONS", "FALLBACK_MODES", "MISALIGNED_POLICIES", "NPU_RUNTIMES",
           "check_runtime_options"]

#: Options of the executor (applied when a model is loaded, not part of what is compiled).
RUNTIME_OPTIONS = ("fallback_mode", "opencl_device", "misaligned", "max_requests", "npu_runtime")
#: How tensors cross from one backend to the next (rfcs/0003).
FALLBACK_MODES = ("auto", "import", "copy")
#: What to do with a caller buffer the GPU cannot import in place.
MISALIGNED_POLICIES = ("copy", "reject")
#: How an Ethos-U subgraph runs: its generated command stream on the functional model
#: (``ethosu_stream``; a subgraph with no stream keeps the emulator), or the TensorIR emulator.
NPU_RUNTIMES = ("stream", "tir")


def check_runtime_options(opts: Mapping[str, Any]) -> None:
    """Raise :class:`OptionError` naming the first unknown option, else the first bad value in
    :data:`RUNTIME_OPTIONS` order."""
    unknown = sorted(set(opts) - set(RUNTIME_OPTIONS))
    if unknown:
        raise OptionError(f"unknown runtime option(s) {', '.join(unknown)}; "
                          f"allowed: {', '.join(RUNTIME_OPTIONS)}")
    for key in RUNTIME_OPTIONS:
        if key in opts and not _ACCEPTS[key](opts[key]):
            raise OptionError(f"option '{key}': bad value {opts[key]!r}; {_ALLOWED[key]}")


def _is_device(value: Any) -> bool:
    # a pyopencl.Device is taken as is; recognised by its module so pyopencl is not imported
    return value is None or isinstance(value, str) or \
        type(value).__module__.partition(".")[0] == "pyopencl"


_ACCEPTS = {
    "fallback_mode": lambda v: v in FALLBACK_MODES,
    "opencl_device": _is_device,
    "misaligned": lambda v: v in MISALIGNED_POLICIES,
    "max_requests": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "npu_runtime": lambda v: v in NPU_RUNTIMES,
}
_ALLOWED = {
    "fallback_mode": f"allowed values: {', '.join(FALLBACK_MODES)}",
    "opencl_device": "allowed: None, a device selection string such as 'pocl' or "
                     "'<platform>:<device>', or a pyopencl.Device",
    "misaligned": f"allowed values: {', '.join(MISALIGNED_POLICIES)}",
    "max_requests": "a positive integer",
    "npu_runtime": f"allowed values: {', '.join(NPU_RUNTIMES)} (the Ethos-U command stream on "
                   "the functional model, or the TensorIR emulator)",
}
