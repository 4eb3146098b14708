"""Exceptions raised by tvm-ethos.

Every failure a user can cause (a bad file, an unknown target, a bad option, a model an NPU
cannot take) is reported as a :class:`TvmEthosError` subclass whose message names the problem,
never as a raw TVM traceback.
"""


class TvmEthosError(Exception):
    """Base class of every error tvm-ethos raises on purpose."""


class ModelLoadError(TvmEthosError):
    """The model file cannot be read: missing, empty, truncated, or not a model at all."""


class UnsupportedModelError(TvmEthosError):
    """The file is a model, but of a kind or with content tvm-ethos cannot compile."""


class TargetError(TvmEthosError, ValueError):
    """A target string or target list is invalid (unknown name, no host target, ...)."""


class OptionError(TvmEthosError, ValueError):
    """A compile or partition option is unknown or has a bad value."""


class BackendError(TvmEthosError):
    """A backend is missing, invalid, or was rejected by the registry."""


class CompileError(TvmEthosError):
    """Lowering or building failed after the inputs were validated."""


class MemoryBudgetError(CompileError):
    """No schedule of an NPU subgraph fits the memory budget. The message is the planner's: the
    budget and the smallest memory any schedule needs (also in ``budget`` and ``minimum``)."""

    def __init__(self, message: str, budget: int | None = None, minimum: int | None = None,
                 subgraph: str | None = None):
        super().__init__(message)
        self.budget, self.minimum, self.subgraph = budget, minimum, subgraph
