"""Affine propagators: how a stripe of a Part's output maps onto a stripe of one input.

A Propagator holds an augmented affine matrix ``transform`` of shape
(input_dims + 1) x (output_dims + 1) and an ``offset`` per input dimension (the RFC's
formulation, seed 004). Entries are ints or ``fractions.Fraction`` so that fractional strides
(upscaling) and offsets (padding of strided windows) propagate exactly; TVM's cascader used
floats and truncated them.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence, Union

from planner.errors import PlannerError

Number = Union[int, Fraction]


def _norm(x: Number) -> Number:
    """Keep exact integers as int so hashing, JSON and fast paths stay simple."""
    if isinstance(x, Fraction) and x.denominator == 1:
        return int(x.numerator)
    return x


@dataclass(frozen=True)
class Propagator:
    """How a stripe of a Part's output maps onto the region of one input it reads.

    Invariants: ``transform`` is (input_dims + 1) rows of (output_dims + 1) entries, its last
    row the augmentation row; ``offset`` has one entry per input dimension; every entry is an
    int, or a Fraction that is not an integer (exact integers are stored as ints).
    ``whole_axes`` (sorted output axes) are those a window reads every position of, whatever
    the stripe (the terms ``one_driver_per_axis`` folded): the window is exact only for a
    stripe that covers each of them whole.
    """
    transform: tuple[tuple[Number, ...], ...]
    offset: tuple[Number, ...]
    whole_axes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        rows = len(self.transform)
        if rows < 1:
            raise PlannerError("a propagator's transform needs at least the augmentation row "
                               "(0, ..., 0, 1)")
        cols = len(self.transform[0])
        if any(len(r) != cols for r in self.transform):
            raise PlannerError("a propagator's transform rows must all have output_dims + 1 "
                               f"entries, got rows of {sorted({len(r) for r in self.transform})}")
        if len(self.offset) != rows - 1:
            raise PlannerError(f"propagator offset has {len(self.offset)} entries, expected "
                               f"{rows - 1} (one per input dimension)")
        object.__setattr__(
            self, "transform", tuple(tuple(_norm(Fraction(v)) for v in r) for r in self.transform)
        )
        object.__setattr__(self, "offset", tuple(_norm(Fraction(v)) for v in self.offset))
        whole = tuple(sorted({int(a) for a in self.whole_axes}))
        if any(not 0 <= a < cols - 1 for a in whole):
            raise PlannerError(f"propagator whole_axes {whole} name axes outside its "
                               f"{cols - 1} output dims")
        object.__setattr__(self, "whole_axes", whole)

    def __hash__(self) -> int:
        try:            # kept once computed (see StripeConfig.__hash__)
            return self._hash
        except AttributeError:
            h = hash((self.transform, self.offset))
            object.__setattr__(self, "_hash", h)
            return h

    @property
    def input_dims(self) -> int:
        return len(self.transform) - 1

    @property
    def output_dims(self) -> int:
        return len(self.transform[0]) - 1

    @staticmethod
    def build(linear: Sequence[Sequence[Number]], const: Sequence[Number],
              offset: Sequence[Number]) -> "Propagator":
        """Assemble from the linear part, the constant column and the offset."""
        out_dims = len(linear[0]) if linear else 0
        rows = [tuple(row) + (c,) for row, c in zip(linear, const)]
        rows.append(tuple([0] * out_dims) + (1,))
        return Propagator(tuple(rows), tuple(offset))

    @staticmethod
    def identity(dims: int) -> "Propagator":
        lin = [[1 if i == j else 0 for j in range(dims)] for i in range(dims)]
        return Propagator.build(lin, [0] * dims, [0] * dims)

    def linear(self, i: int, j: int) -> Number:
        return self.transform[i][j]

    def const(self, i: int) -> Number:
        return self.transform[i][-1]

    def _rows(self):
        """Per input axis: ((output axis, coefficient) for non-zero entries, constant)."""
        rows = self.__dict__.get("_sparse")
        if rows is None:
            cols = self.output_dims
            rows = tuple((tuple((j, r[j]) for j in range(cols) if r[j] != 0), r[cols])
                         for r in self.transform[:-1])
            object.__setattr__(self, "_sparse", rows)
        return rows

    def apply_shape(self, shape: Sequence[Number]) -> tuple[Number, ...]:
        """M @ [shape, 1]: the input extent that an output extent of ``shape`` needs."""
        out = []
        for terms, const in self._rows():
            acc = const
            for j, c in terms:
                acc = acc + c * shape[j]
            # ``type is int`` first: isinstance against Fraction (an ABC) is slow
            out.append(acc if type(acc) is int else _norm(acc))
        return tuple(out)

    def apply_linear(self, vec: Sequence[Number]) -> tuple[Number, ...]:
        """The linear part only: used for strides, which have no constant term."""
        out = []
        for terms, _ in self._rows():
            acc: Number = 0
            for j, c in terms:
                acc = acc + c * vec[j]
            out.append(acc if type(acc) is int else _norm(acc))
        return tuple(out)

    def apply_offset(self, offset: Sequence[Number]) -> tuple[Number, ...]:
        """Where the input stripe starts, given where the output stripe starts."""
        out = []
        for a, b in zip(self.apply_linear(offset), self.offset):
            x = a + b
            out.append(x if type(x) is int else _norm(x))
        return tuple(out)

    def drivers(self) -> tuple[tuple[int, Number] | None, ...]:
        """Per input axis, (driving output axis, its coefficient), or None if none moves it:
        ``driving_axis`` and ``linear`` of every axis at once, for hot loops."""
        out = self.__dict__.get("_drivers")
        if out is None:
            out = tuple((terms[0][0], terms[0][1]) if terms else None
                        for terms, _ in self._rows())
            object.__setattr__(self, "_drivers", out)
        return out

    def integer_axis_maps(self) -> tuple[tuple[int | None, int, int, int], ...] | None:
        """Per input axis (driving output axis or None, its coefficient, constant, offset),
        when every entry is an int and every axis is moved by at most one output axis (every
        operator but upscaling and reshapes): then propagating a stripe with integer
        positions is plain integer arithmetic (``StripeConfig.propagate``'s fast path, the
        planner's hottest call). None otherwise."""
        out = self.__dict__.get("_int_maps", self)
        if out is self:
            out = []
            for (terms, const), off in zip(self._rows(), self.offset):
                if len(terms) > 1 or type(const) is not int or type(off) is not int or \
                        any(type(c) is not int for _, c in terms):
                    out = None
                    break
                j, lin = terms[0] if terms else (None, 0)
                out.append((j, lin, const, off))
            out = None if out is None else tuple(out)
            object.__setattr__(self, "_int_maps", out)
        return out

    def one_driver_per_axis(self, out_shape: Sequence[int],
                            in_shape: Sequence[int]) -> "Propagator":
        """This propagator with every input axis moved by at most one output axis, reading
        at least what this one reads.

        A reshape that merges axes reads, along one input axis, a mixed-radix sum of several
        output axes (row ``4*h + w`` of a 20-row tensor reshaped to 5x4). The stripe and
        window arithmetic (``drivers``, ``driving_axis``, ``planner.windows.window``) follows
        one output axis per input axis, so a second term would be dropped from every stripe's
        window and stride. Here the output axis of the largest coefficient (the outermost of
        a mixed radix) among those longer than one element keeps driving and every other term
        counts as if its output axis ran over its whole extent ``E`` (the constant grows by
        ``coefficient * E``): exact where those axes are not striped, a superset of the rows
        read where they are. A negative term (a reversal) reads the whole input axis
        instead. The output axes no longer driving are the result's ``whole_axes``."""
        rows = self._rows()
        if all(len(terms) <= 1 for terms, _ in rows):
            return self
        if len(out_shape) != self.output_dims or len(in_shape) != self.input_dims:
            raise PlannerError(f"propagator maps {self.output_dims}->{self.input_dims} dims; "
                               f"shapes {tuple(out_shape)} -> {tuple(in_shape)} do not fit it")
        lin, const, offset, whole = [], [], [], set()
        for i, (terms, k) in enumerate(rows):
            row = [0] * self.output_dims
            if len(terms) <= 1:
                for j, c in terms:
                    row[j] = c
                lin.append(row)
                const.append(k)
                offset.append(self.offset[i])
                continue
            if any(c < 0 for _, c in terms):
                lin.append(row)
                const.append(int(in_shape[i]))
                offset.append(0)
                whole.update(j for j, _ in terms)
                continue
            d, c_d = max(terms, key=lambda t: (int(out_shape[t[0]]) > 1, t[1], -t[0]))
            row[d] = c_d
            lin.append(row)
            const.append(k + sum(c * int(out_shape[j]) for j, c in terms if j != d))
            offset.append(self.offset[i])
            whole.update(j for j, _ in terms if j != d)
        built = Propagator.build(lin, const, offset)
        return Propagator(built.transform, built.offset, tuple(whole | set(self.whole_axes)))

    def covers_whole_axes(self, ranges: Sequence[tuple[tuple[int, int], ...]],
                          out_shape: Sequence[int]) -> bool:
        """Whether every stripe, ``ranges[a]`` its [lo, hi) per output axis, covers each of
        ``whole_axes`` whole: only then are this propagator's windows what is read, not more
        (a schedule computing the exact region would hold less than the plan)."""
        return all(ranges[a] == ((0, int(out_shape[a])),) for a in self.whole_axes)

    def driving_axis(self, i: int) -> int | None:
        """The output axis whose position moves input axis ``i`` (None if it never moves)."""
        row = self.transform[i]
        for j in range(self.output_dims):
            if row[j] != 0:
                return j
        return None

    def compose(self, inner: "Propagator") -> "Propagator":
        """``inner`` applied after ``self``: output of self's Part -> input of inner's Part.

        ``self`` maps a stripe of Part A's output to A's input, which is Part B's output;
        ``inner`` maps B's output to B's input. The result maps A's output to B's input.
        """
        if inner.output_dims != self.input_dims:
            raise PlannerError(f"cannot compose propagators: the inner one expects "
                               f"{inner.output_dims} dims, the outer produces {self.input_dims}")
        a, b = inner.transform, self.transform
        rows = []
        for i in range(len(a)):
            rows.append(tuple(
                sum((a[i][k] * b[k][j] for k in range(len(b))), Fraction(0))
                for j in range(len(b[0]))
            ))
        offset = tuple(x + y for x, y in zip(inner.apply_linear(self.offset), inner.offset))
        return Propagator(tuple(rows), offset)
