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

Two contracts extend it, each the whole of what the compiler asks of one kind of target, so
that a backend folder's one class is everything there is to read about it (as one device file
is in tinygrad, one ``Architecture`` in Regor):

* :class:`NpuBackend`: an accelerator. Its planner device, option schema, pattern table,
  codegen (the emulator's ``relax.ext.<id>``), emulator lowering, command-stream generator and
  the plan table's lines about its streams. A new NPU is a new folder implementing it.
* :class:`HostBackend`: the fallback target that takes what no accelerator took, and what
  the compile of that target produces (:class:`HostOutput`).
"""
from __future__ import annotations

import abc
import enum
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from planner.work_memory import WorkMemory
from tvm_ethos.backends.planner_device import planner_device_for
from tvm_ethos.errors import OptionError

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
class EmulatorLowering:
    """How the NPU emulator lowers this NPU's subgraphs where NPUs differ in arithmetic.

    ``tflite_fc_rounding``: FULLY_CONNECTED rounds as TFLite Micro's kernel does (the NPU's
    stream and its reference agree on it), not as the other integer kernels round, and an
    int16 SOFTMAX takes TFLite Micro's tables and multiplier (``te_ops.lower_qop``'s
    ``tfl_rounding``).
    ``fold_pads``: a PAD read only by a convolution the NPU pads for is that convolution's
    padding (``compute.pad_fold``), as Vela folds it."""

    tflite_fc_rounding: bool = False
    fold_pads: bool = False


class NpuBackend(Backend, abc.ABC):
    """The whole contract of an accelerator: implement every abstract method in one class.

    The compile path asks nothing else of an NPU: partitioning reads :meth:`layer_support`
    and :meth:`options_schema`; planning :meth:`planner_device`; code generation
    :meth:`codegen_factory`, :meth:`emulator_lowering` and :meth:`command_stream`; the plan
    report :meth:`stream_report` and :meth:`stream_report_lines`; ``tvmc plan`` sweeps
    :attr:`device_options`.
    """

    #: The options that pick the planner device, in the order ``tvmc plan`` sweeps their comma
    #: lists (``--target-<id>-<option>=a,b``); each must be a key of :meth:`options_schema`.
    device_options: tuple[str, ...] = ()

    @abc.abstractmethod
    def options_schema(self) -> dict[str, OptionSpec]:
        """The per-target options (``-key=value`` in a target string, keyword arguments of
        ``compile``, ``--target-<id>-<key>`` flags of ``tvmc``), each validated up front."""

    @abc.abstractmethod
    def layer_support(self) -> LayerSupport:
        """The pattern table: one check per operator kind it takes."""

    @abc.abstractmethod
    def codegen_factory(self):
        """The codegen its subgraphs go through (``npu_common.NpuCodegen``: the emulator)."""

    @abc.abstractmethod
    def capabilities(self) -> Capabilities:
        """Memory alignment and import / export sources (``npu_common.NPU_CAPABILITIES``)."""

    @abc.abstractmethod
    def planner_device_name(self, options: Mapping[str, Any]) -> str | None:
        """The planner's device (``planner.devices``) for these target options, or None when
        the planner has no performance model of it."""

    @abc.abstractmethod
    def planner_sram_size(self, options: Mapping[str, Any]) -> int | None:
        """The SRAM size the options set for the planner device (bytes), or None: the
        device's own."""

    @abc.abstractmethod
    def planner_device_names(self) -> tuple[str, ...]:
        """Every planner device this NPU can be (what a user may choose from)."""

    @abc.abstractmethod
    def emulator_lowering(self) -> EmulatorLowering:
        """How the emulator's integer kernels lower this NPU's subgraphs."""

    @abc.abstractmethod
    def command_stream(self, lowered, options: dict, planned=None):
        """The device's own code for one lowered subgraph, or None where the backend has none
        (the emulator runs it); raises ``CompileError`` naming what it cannot express.
        ``planned``: ``(match, proposal, device)``, the planner's schedule, when the subgraph
        was planned."""

    @abc.abstractmethod
    def stream_report(self, payload, planned_peak: int | None) -> dict:
        """What ``payload`` does when run (bytes, MACs, memory touched), for the plan
        report's ``streams`` entry of its subgraph."""

    @abc.abstractmethod
    def stream_report_lines(self, entry: dict) -> list[str]:
        """The plan table's lines for one ``streams`` entry (:meth:`stream_report`'s, or a
        ``{"generated": False, "reason": ...}`` one)."""

    def planner_solitary_ops(self) -> frozenset:
        """The operators (``ethos_arch.ops.Op``) its code generator runs only over tensors held
        whole, which the planner then never cascades (``planner.device_model.Device.solitary``);
        none by default."""
        return frozenset()

    def planner_work(self, layer) -> WorkMemory | None:
        """The working memory its code generator needs for ``layer`` (a lowered operator)
        beyond its operands, which the planner holds in the layer's Plan
        (``planner.work_memory``); None (the default): none."""
        return None

    def planner_whole_output_ops(self) -> frozenset:
        """The operators its code generator computes only over their whole output in one
        step, which the planner then cascades only unstriped through them
        (``planner.device_model.Device.whole_output``); none by default."""
        return frozenset()

    def planner_device(self, options: Mapping[str, Any], pools: Mapping[str, dict] | None = None):
        """The planner Device the compile plans for with these target options and the user's
        memory pools (``{memory: {field: value}}``), or None (no performance model)."""
        name = self.planner_device_name(options)
        if name is None or name not in self.planner_device_names():
            return None
        return planner_device_for(name, self.planner_sram_size(options), pools or {},
                                  self.planner_solitary_ops(), self.planner_whole_output_ops())

    def sweep_device_names(self, options: Mapping[str, str]) -> list[tuple[str, str]]:
        """``tvmc plan``'s devices: every combination of the comma lists given for
        :attr:`device_options` (the schema's default where none is given), as
        ``(what an error shows: the value of a single option, else the name; planner device
        name)``."""
        schema = self.options_schema()
        lists = [[v.strip() for v in str(options.get(k, schema[k].default)).split(",")]
                 for k in self.device_options]
        out = []
        for combo in itertools.product(*lists):
            name = self.planner_device_name(dict(zip(self.device_options, combo)))
            out.append((combo[0] if len(combo) == 1 else name, name))
        return out

    def optimize_subgraph(self, view, options=None) -> OptimizationViews:
        """The emulator takes every subgraph the pattern checks accepted, unchanged."""
        return OptimizationViews(untouched=[view])


class HostOutput(enum.Enum):
    """What a compile for a host target produces."""

    #: a tvm-ethos package: the host's kernels built by TVM, run by the Relax VM / executor
    PACKAGE = "package"
    #: the source ``.tflite`` itself, the NPU's subgraphs in it as custom operators: the
    #: host's operators stay TFLite operators (TFLite Micro); it takes a ``.tflite`` model only
    TFLITE = "tflite"


class HostBackend(Backend, abc.ABC):
    """The contract of a host (fallback) target: the last of a target list, which takes every
    operator no accelerator took."""

    @abc.abstractmethod
    def options_schema(self) -> dict[str, OptionSpec]:
        """The per-target options, as :meth:`NpuBackend.options_schema`."""

    @abc.abstractmethod
    def layer_support(self) -> LayerSupport:
        """The quantized operators it runs with its own kernels (the rest: TVM's legalization,
        or, for a :attr:`HostOutput.TFLITE` host, the TFLite graph)."""

    @abc.abstractmethod
    def codegen_factory(self):
        """Its codegen (``npu_common.HostCodegen``: the TVM targets its kernels are built for),
        or None where it builds nothing."""

    @abc.abstractmethod
    def capabilities(self) -> Capabilities:
        """Its memory facts; ``is_host`` is True."""

    @abc.abstractmethod
    def host_output(self) -> HostOutput:
        """What a compile whose host it is produces."""

    def compile_model(self, mod, target, options: dict):
        """The compiled model of a host whose output is not a package (:attr:`HostOutput.TFLITE`):
        such a host compiles the whole model its own way, so ``tvm_ethos.compile`` hands it over
        through this contract rather than importing the backend by name."""
        raise NotImplementedError(f"host {self.backend_id!r} produces "
                                  f"{self.host_output().value}: it has no compile of its own")


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
