"""The planner's view of a network: Tensors joined by Parts.

A Part stands for one NPU operation (which may be several TE compute ops on the TVM side). It
has exactly one output and one Propagator per input, so cascading analysis never needs to know
what the operator does, only how its output stripes depend on its inputs.
"""
from __future__ import annotations

import dataclasses
import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ethos_arch.ops import Op
from planner.errors import PlannerError
from planner.propagator import Propagator

DTYPE_BYTES = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "float16": 2, "float32": 4,
               "int64": 8}


@dataclass(frozen=True)
class Tensor:
    """A tensor of the network, as the planner sizes it.

    Invariants: every dimension of ``shape`` is a positive int; ``dtype`` is a key of
    DTYPE_BYTES; ``0 < compression_ratio <= 1`` (stored bytes of an encoded constant over its
    raw bytes; 1 for activations). Equal fields mean an equal tensor (the name included).
    """
    name: str
    shape: tuple[int, ...]
    dtype: str = "int8"
    is_constant: bool = False
    compression_ratio: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if any(s < 1 for s in self.shape):
            raise PlannerError(f"tensor {self.name!r} has a non-positive dimension {self.shape}")
        if self.dtype not in DTYPE_BYTES:
            raise PlannerError(f"tensor {self.name!r} has unknown dtype {self.dtype!r}; "
                               f"known: {sorted(DTYPE_BYTES)}")
        if not 0 < self.compression_ratio <= 1.0:
            raise PlannerError(f"tensor {self.name!r}: compression_ratio must be in (0, 1], "
                               f"got {self.compression_ratio}")

    def __hash__(self) -> int:
        try:            # kept once computed (see StripeConfig.__hash__)
            return self._hash
        except AttributeError:
            h = hash((self.name, self.shape, self.dtype, self.is_constant,
                      self.compression_ratio))
            object.__setattr__(self, "_hash", h)
            return h

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        """Bytes as stored: constants may be compressed (weights encoded for the NPU)."""
        n = self.__dict__.get("_bytes")      # asked for in every plan costing: compute once
        if n is None:
            n = math.ceil(self.elements * self.itemsize * self.compression_ratio)
            object.__setattr__(self, "_bytes", n)
        return n

    def region_bytes(self, shape: Sequence[int]) -> int:
        """Bytes of a sub-block of this tensor (a stripe or a buffer)."""
        return math.ceil(math.prod(shape) * self.itemsize * self.compression_ratio)


def part_kind(name: str) -> Op | str:
    """The kind of a Part read as ``name``: its :class:`~ethos_arch.ops.Op`, or ``name`` itself
    for an operator outside the vocabulary, which the planner can only model as opaque (each
    output stripe reads its whole input), as a JSON graph may name one ("nms")."""
    try:
        return Op(name)
    except ValueError:
        return name


def part_operator(part: "Part") -> Op | str:
    """The operator a Part runs: its kind, or, for a coarser kind that stands for several
    operators (a RESHAPE costed as a copy, a PAD, a UNARY, ...), the operator its ``op``
    attribute names, so that a device can tell apart operators the planner costs alike."""
    op = part.attr("op")
    if isinstance(op, str):
        named = part_kind(op)
        if isinstance(named, Op):
            return named
    return part.kind


@dataclass(frozen=True)
class Part:
    """One NPU operation: its inputs (activations and constants), one output, propagators.

    Invariants: one Propagator per input, each mapping the output's rank to its input's
    rank, each input axis moved by at most one output axis (``Propagator.one_driver_per_axis``
    widens a propagator given with several); ``attrs`` (what a performance model needs:
    kernel, strides, activation, ...) is a tuple of (key, value) pairs sorted by key, so that
    Parts stay hashable and deterministic.
    ``kind`` is an :class:`~ethos_arch.ops.Op`, or the name of an operator the planner knows
    only by its whole-input dependence (an opaque Part read from JSON, :func:`part_kind`).
    """
    name: str
    kind: Op | str
    inputs: tuple[Tensor, ...]
    output: Tensor
    propagators: tuple[Propagator, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.propagators):
            raise PlannerError(f"part {self.name!r}: {len(self.inputs)} inputs but "
                               f"{len(self.propagators)} propagators")
        for t, p in zip(self.inputs, self.propagators):
            if p.input_dims != len(t.shape) or p.output_dims != len(self.output.shape):
                raise PlannerError(
                    f"part {self.name!r}: propagator for {t.name!r} maps "
                    f"{p.output_dims}->{p.input_dims} dims, tensors are "
                    f"{len(self.output.shape)}->{len(t.shape)}")
        # the planner's stripes and windows follow one output axis per input axis
        object.__setattr__(self, "propagators", tuple(
            p.one_driver_per_axis(self.output.shape, t.shape)
            for t, p in zip(self.inputs, self.propagators)))
        items = self.attrs.items() if isinstance(self.attrs, Mapping) else self.attrs
        object.__setattr__(self, "attrs", tuple(sorted(items)))

    def __hash__(self) -> int:
        # Parts key every cost cache: hash once, not on every lookup.
        try:
            return self._hash
        except AttributeError:
            h = hash((self.name, self.kind, self.inputs, self.output, self.propagators,
                      self.attrs))
            object.__setattr__(self, "_hash", h)
            return h

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def activation_inputs(self) -> tuple[tuple[int, Tensor], ...]:
        got = self.__dict__.get("_activation_inputs")   # hot in plan costing: build once
        if got is None:
            got = tuple((i, t) for i, t in enumerate(self.inputs) if not t.is_constant)
            object.__setattr__(self, "_activation_inputs", got)
        return got

    @property
    def constant_inputs(self) -> tuple[tuple[int, Tensor], ...]:
        got = self.__dict__.get("_constant_inputs")
        if got is None:
            got = tuple((i, t) for i, t in enumerate(self.inputs) if t.is_constant)
            object.__setattr__(self, "_constant_inputs", got)
        return got

    def performance(self, model: Any, out_shape: Sequence[int]) -> int:
        """Estimated compute cycles of one stripe of ``out_shape`` on a device's model."""
        return model.compute_cycles(self, tuple(out_shape))

    def with_attrs(self, **extra: Any) -> "Part":
        """This Part with ``extra`` attrs added or replaced: what a constructor does not take
        (a concatenation's activation, a leaky relu's alpha, a feature map's layout)."""
        return dataclasses.replace(self, attrs={**dict(self.attrs), **extra})


@dataclass(frozen=True)
class PlannerGraph:
    """An immutable DAG of Parts. Build it with :class:`GraphBuilder` or ``planner.io``."""
    parts: tuple[Part, ...]
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    name: str = "graph"
    _index: dict = field(default=None, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        producers: dict[str, Part] = {}
        tensors: dict[str, Tensor] = {}

        def see(t: Tensor) -> None:
            old = tensors.get(t.name)
            if old is not None and old != t:
                raise PlannerError(f"two different tensors are named {t.name!r}")
            tensors[t.name] = t

        names = set()
        for p in self.parts:
            if p.name in names:
                raise PlannerError(f"two parts are named {p.name!r}")
            names.add(p.name)
            if p.output.is_constant:
                raise PlannerError(f"part {p.name!r} produces constant tensor {p.output.name!r}")
            if p.output.name in producers:
                raise PlannerError(f"tensor {p.output.name!r} is produced by both "
                                   f"{producers[p.output.name].name!r} and {p.name!r}")
            producers[p.output.name] = p
            see(p.output)
            for t in p.inputs:
                see(t)
        for t in self.inputs:
            see(t)
            if t.name in producers:
                raise PlannerError(f"network input {t.name!r} is produced by a part")
        input_names = {t.name for t in self.inputs}
        for p in self.parts:
            for t in p.inputs:
                if not t.is_constant and t.name not in producers and t.name not in input_names:
                    raise PlannerError(f"part {p.name!r} reads {t.name!r}, which no part "
                                       "produces and which is not a network input")
        for t in self.outputs:
            if t.name not in producers and t.name not in input_names:
                raise PlannerError(f"network output {t.name!r} is produced by no part")
        successors: dict[str, set[str]] = {p.name: set() for p in self.parts}
        consumers: dict[str, list[Part]] = {}
        for p in self.parts:
            for t in p.inputs:
                if t.is_constant:
                    continue
                consumers.setdefault(t.name, []).append(p)
                if t.name in producers:
                    successors[producers[t.name].name].add(p.name)
        topo = topological_order([p.name for p in self.parts], successors)
        by_name = {p.name: p for p in self.parts}
        object.__setattr__(self, "_index", {
            "producers": producers, "consumers": consumers, "tensors": tensors,
            "topo": tuple(by_name[n] for n in topo), "by_name": by_name,
            "constant_readers": {t.name: p.name for p in self.parts for t in p.inputs
                                 if t.is_constant},
        })

    def producer(self, tensor: Tensor | str) -> Part | None:
        name = tensor if isinstance(tensor, str) else tensor.name
        return self._index["producers"].get(name)

    def consumers(self, tensor: Tensor | str) -> tuple[Part, ...]:
        name = tensor if isinstance(tensor, str) else tensor.name
        return tuple(self._index["consumers"].get(name, ()))

    def part(self, name: str) -> Part:
        try:
            return self._index["by_name"][name]
        except KeyError:
            raise PlannerError(f"no part named {name!r}") from None

    def constant_reader(self, name: str) -> str | None:
        """The name of the Part reading constant tensor ``name`` (the last in ``parts``
        where several do); None for a tensor no Part reads as a constant."""
        return self._index["constant_readers"].get(name)

    def tensor(self, name: str) -> Tensor:
        try:
            return self._index["tensors"][name]
        except KeyError:
            raise PlannerError(f"no tensor named {name!r}") from None

    @property
    def tensors(self) -> tuple[Tensor, ...]:
        return tuple(self._index["tensors"].values())

    def topological_parts(self) -> tuple[Part, ...]:
        """Parts in a deterministic topological order (ties broken by insertion order)."""
        return self._index["topo"]


class GraphBuilder:
    """Incremental construction of a PlannerGraph without TVM.

    >>> b = GraphBuilder("tiny")
    >>> x = b.input("x", (1, 8, 8, 4))
    >>> y = b.add(parts.conv2d("c", x, out_channels=8, kernel=(3, 3), padding=(1, 1, 1, 1)))
    >>> g = b.build(outputs=[y])
    """

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self._parts: list[Part] = []
        self._inputs: list[Tensor] = []

    def input(self, name: str, shape: Sequence[int], dtype: str = "int8") -> Tensor:
        t = Tensor(name, tuple(shape), dtype)
        self._inputs.append(t)
        return t

    def add(self, part: Part) -> Tensor:
        self._parts.append(part)
        return part.output

    def extend(self, parts: Iterable[Part]) -> None:
        for p in parts:
            self.add(p)

    def build(self, outputs: Sequence[Tensor] | None = None) -> PlannerGraph:
        if outputs is None:
            consumed = {t.name for p in self._parts for t in p.inputs}
            outputs = [p.output for p in self._parts if p.output.name not in consumed]
        return PlannerGraph(tuple(self._parts), tuple(self._inputs), tuple(outputs), self.name)


def topological_order(names: Sequence[str], successors: Mapping[str, Iterable[str]]
                      ) -> list[str]:
    """``names`` in a topological order of the edges ``successors`` (name -> the names that
    depend on it), ties broken by position in ``names``: of the names whose predecessors all
    come before, the one listed first is next (Kahn's algorithm on a heap of positions).
    Raises PlannerError on a cycle."""
    position = {n: i for i, n in enumerate(names)}
    waiting = dict.fromkeys(names, 0)
    for n in names:
        for m in successors.get(n, ()):
            waiting[m] += 1
    ready = [position[n] for n in names if waiting[n] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        n = names[heapq.heappop(ready)]
        out.append(n)
        for m in successors.get(n, ()):
            waiting[m] -= 1
            if waiting[m] == 0:
                heapq.heappush(ready, position[m])
    if len(out) != len(names):
        raise PlannerError("the graph has a cycle")
    return out
