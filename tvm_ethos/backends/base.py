"""The backend interface (after Arm NN's IBackendInternal, seed 002).

A backend is a light, stateless factory object. It provides:

* ``layer_support()``: its pattern table, a check per operator kind that returns the list of
  constraints a :class:`~tvm_ethos.patterns.QOp` violates (empty = supported);
* ``codegen_factory()``: how its subgraphs become code (an NPU: a ``relax.ext.<id>`` codegen;
  a host target: the TVM target its kernels and the fallback operators are built for);
* ``create_memory_manager()``: ``acquire()`` before a run, ``release()`` on unload;
* ``capabilities()``: memory alignment, import / export memory sources,
  ``fallback_import_memory_required``, whether it is a host (fallback) target;
* ``create_backend_context(options)``: optional; notified before / after a network is loaded
  and unloaded;
* ``optimize_subgraph(view)``: returns :class:`OptimizationViews` (substitutions, failed
  subgraphs re-assigned to the next backend, untouched subgraphs).

Backends reach the rest of tvm-ethos only through these interfaces.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

#: Backend API version of this host. A backend built for (major, minor) loads only when its
#: major equals this major and its minor is not newer than this minor.
BACKEND_API_VERSION = (1, 0)


@dataclass(frozen=True)
class Capabilities:
    memory_alignment: int = 64
    import_memory_sources: frozenset = frozenset({"malloc"})
    export_memory_sources: frozenset = frozenset({"malloc"})
    fallback_import_memory_required: bool = False
    is_host: bool = False
    is_npu: bool = False


@dataclass
class OptionSpec:
    """One per-target option: default and the allowed values (or a validator)."""

    default: Any
    allowed: tuple | None = None
    validator: Callable[[Any], bool] | None = None
    help: str = ""

    def check(self, target: str, name: str, value):
        from tvm_ethos.errors import OptionError

        if self.allowed is not None and value not in self.allowed:
            raise OptionError(
                f"option {name!r} of target {target!r}: bad value {value!r}; "
                f"allowed values: {', '.join(map(str, self.allowed))}"
            )
        if self.validator is not None and not self.validator(value):
            raise OptionError(
                f"option {name!r} of target {target!r}: bad value {value!r}; {self.help}"
            )
        return value


@dataclass
class SubgraphView:
    """A subgraph assigned to a backend: the Relax function and its operators."""

    name: str
    function: Any  # relax.Function
    operators: list = field(default_factory=list)  # QOp list, in order


@dataclass
class OptimizationViews:
    substitutions: list = field(default_factory=list)  # (SubgraphView, replacement relax.Function)
    failed: list = field(default_factory=list)  # (SubgraphView, reason)
    untouched: list = field(default_factory=list)  # SubgraphView


class MemoryManager:
    """Acquire / release of the memory a backend's workloads use (no-op by default)."""

    def __init__(self):
        self.acquired = False

    def acquire(self):
        self.acquired = True

    def release(self):
        self.acquired = False


class BackendContext:
    """Optional per-backend context, notified around network load and unload."""

    def before_load_network(self, network_id: int):
        pass

    def after_load_network(self, network_id: int):
        pass

    def before_unload_network(self, network_id: int):
        pass

    def after_unload_network(self, network_id: int):
        pass


class LayerSupport:
    """A backend's pattern table: the operator kinds it takes and one check per kind.

    ``checks[kind](qop, options) -> list[str]`` returns the violated constraints.
    """

    def __init__(self, checks: dict[str, Callable], common: Callable | None = None):
        self.checks = dict(checks)
        self.common = common

    def kinds(self) -> list[str]:
        return list(self.checks)

    def why_not(self, qop, options: dict) -> list[str]:
        check = self.checks.get(qop.kind)
        if check is None:
            return [f"operator {qop.tflite_name} is not supported"]
        reasons = list(qop.problems)
        if self.common is not None:
            reasons += self.common(qop, options)
        reasons += check(qop, options)
        return reasons


class Backend:
    """Base class of every backend (built-in or third-party)."""

    backend_id: str = ""
    api_version: tuple = BACKEND_API_VERSION

    def options_schema(self) -> dict[str, OptionSpec]:
        return {}

    def layer_support(self) -> LayerSupport:
        return LayerSupport({})

    def codegen_factory(self):
        return None

    def create_memory_manager(self) -> MemoryManager:
        return MemoryManager()

    def capabilities(self) -> Capabilities:
        return Capabilities()

    def create_backend_context(self, options: dict | None = None) -> BackendContext | None:
        return None

    def optimize_subgraph(
        self, view: SubgraphView, options: dict | None = None
    ) -> OptimizationViews:
        return OptimizationViews(untouched=[view])

    def __repr__(self):
        return f"<{type(self).__name__} {self.backend_id!r}>"


@dataclass(frozen=True)
class Plugin:
    """What a backend package exposes (entry point or module on TVM_ETHOS_BACKEND_PATH): seed
    002's plugin interface, made from the backend's id, API version and class."""
    backend_id: str
    version: tuple
    factory: Callable[[], Any]

    def get_backend_id(self) -> str:
        return self.backend_id

    def get_version(self) -> tuple:
        return self.version

    def backend_factory(self):
        return self.factory()
