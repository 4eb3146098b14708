"""Stripe configurations: how a tensor (or the region a Part computes) is cut into stripes.

Stripe ``i`` along axis ``a`` covers the half-open range
``[floor(offset[a] + i * strides[a]), that + shape[a])``, clipped to ``[0, extent[a])``.
``order[a]`` is 0 for an axis that is not iterated and otherwise the axis's place in the loop
nest, 1 being outermost. Offsets and strides may be Fractions (upscaling); shapes are ints.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

from planner.errors import PlannerError
from planner.propagator import Number, Propagator


def _is_int(x: Number) -> bool:
    # the exact type test first: most numbers are ints, and isinstance against Fraction (an
    # ABC) is slow
    return type(x) is int or isinstance(x, int) or \
        (isinstance(x, Fraction) and x.denominator == 1)


def _floor(x: Number) -> int:
    return math.floor(x)


def _rows_read(start: Number, lin: Number, const: Number, rows: int) -> int:
    """How many input rows ``rows`` consecutive output rows read through a fractional
    coefficient (a ``floordiv``: an upscale, a RESHAPE merging axes), the first of them at
    ``start`` = ``lin * c0 + offset``: the union of the single rows' windows, from
    ``floor(start)`` to ``floor(start + lin * (rows - 1))`` plus one row's window, where
    ``lin * rows + const`` rounded up also counts a stripe straddling one more row. Only an
    axis of one stripe is counted so: stripes of several share one shape, which the rolling
    and lockstep buffers (``planner.lockstep``) step through rounded up."""
    first = start - math.floor(start)
    return math.floor(first + lin * (rows - 1)) + math.ceil(lin + const)


@lru_cache(maxsize=500_000)
def _axis_ranges(offset: Number, stride: Number, shape: int, stripes: int, extent: int
                 ) -> tuple[tuple[int, int], ...]:
    out = []
    for i in range(stripes):
        lo = math.floor(offset + i * stride)
        hi = lo + shape
        lo_c, hi_c = max(lo, 0), min(hi, extent)
        out.append((lo_c, max(lo_c, hi_c)))
    return tuple(out)


@lru_cache(maxsize=500_000)
def _axis_max_span(offset: Number, stride: Number, shape: int, stripes: int, extent: int
                   ) -> int:
    """The longest clipped stripe along one axis."""
    return max(hi - lo for lo, hi in _axis_ranges(offset, stride, shape, stripes, extent))


@lru_cache(maxsize=500_000)
def _axis_sizes(offset: Number, stride: Number, shape: int, stripes: int, extent: int
                ) -> tuple[tuple[int, int], ...]:
    """(clipped stripe size, how many stripes have it) along one axis, sizes ascending."""
    return range_sizes(_axis_ranges(offset, stride, shape, stripes, extent))


def range_sizes(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """(size, how many ranges have it) of ``ranges``, sizes ascending."""
    sizes: dict[int, int] = {}
    for lo, hi in ranges:
        sizes[hi - lo] = sizes.get(hi - lo, 0) + 1
    return tuple(sorted(sizes.items()))


_new_counter = Counter.__new__


@dataclass(frozen=True)
class StripeConfig:
    """How a tensor is cut into stripes and in which order they run (the module doc above).

    Invariants: every field has one entry per axis of ``shape``; every ``stripes`` entry is at
    least 1; ``order`` is 0 for an axis not iterated, else its nesting level (1 outermost).
    Configs built with ``unchecked_config`` skip the checks and must satisfy them already.
    """
    shape: tuple[int, ...]
    extent: tuple[int, ...]
    strides: tuple[Number, ...]
    order: tuple[int, ...]
    stripes: tuple[int, ...]
    offset: tuple[Number, ...]

    def __post_init__(self) -> None:
        n = len(self.shape)
        for name in ("extent", "strides", "order", "stripes", "offset"):
            if len(getattr(self, name)) != n:
                raise PlannerError(f"StripeConfig.{name} has {len(getattr(self, name))} "
                                   f"dims, its shape {n}: give every field one entry per axis")
        if any(s < 1 for s in self.stripes):
            raise PlannerError(f"StripeConfig.stripes {self.stripes}: every axis needs at "
                               "least one stripe")

    @staticmethod
    def whole(shape: Sequence[int]) -> "StripeConfig":
        """One stripe covering the whole tensor."""
        n = len(shape)
        return StripeConfig(tuple(shape), tuple(shape), tuple(shape), (0,) * n, (1,) * n, (0,) * n)

    @staticmethod
    def tiled(extent: Sequence[int], shape: Sequence[int], order: Sequence[int]) -> "StripeConfig":
        """Non-overlapping stripes of ``shape`` tiling ``extent``; the last one clipped."""
        shape = tuple(min(int(s), int(e)) for s, e in zip(shape, extent))
        stripes = tuple(-(-e // s) for s, e in zip(shape, extent))
        order = tuple(o if n > 1 else 0 for o, n in zip(order, stripes))
        return StripeConfig(shape, tuple(extent), shape, order, stripes, (0,) * len(shape))

    @property
    def total_stripes(self) -> int:
        return math.prod(self.stripes)

    def __hash__(self) -> int:
        # Kept once computed, read as an attribute (the search's memos hash configs hundreds
        # of thousands of times, and a plain attribute read is the cheapest way back to it).
        try:
            return self._hash
        except AttributeError:
            h = hash((self.shape, self.extent, self.strides, self.order, self.stripes,
                      self.offset))
            object.__setattr__(self, "_hash", h)
            return h

    def axis_ranges(self, axis: int) -> tuple[tuple[int, int], ...]:
        """The clipped [lo, hi) range of each stripe along ``axis`` (empty ranges kept)."""
        return _axis_ranges(self.offset[axis], self.strides[axis], self.shape[axis],
                            self.stripes[axis], self.extent[axis])

    def covers(self, shape: Sequence[int]) -> bool:
        """Whether this is one stripe holding all of a tensor of ``shape`` (its whole output
        computed in one step)."""
        return self.total_stripes == 1 and len(shape) == len(self.shape) and all(
            self.axis_ranges(a) == ((0, int(n)),) for a, n in enumerate(shape))

    def max_spans(self) -> tuple[int, ...]:
        """Per axis, the longest clipped stripe: what a buffer holding one stripe needs."""
        spans = self.__dict__.get("_spans")
        if spans is None:
            spans = tuple(map(_axis_max_span, self.offset, self.strides, self.shape,
                              self.stripes, self.extent))
            object.__setattr__(self, "_spans", spans)
        return spans

    def work_ranges(self, axis: int) -> tuple[tuple[int, int], ...]:
        """The rows computed at each stripe along ``axis``: the stripes themselves (a lockstep
        rolling producer computes less: planner.lockstep)."""
        return self.axis_ranges(axis)

    def work_sizes(self, axis: int) -> tuple[tuple[int, int], ...]:
        """(rows computed, how many stripes compute that many) along ``axis``, sizes
        ascending: ``work_ranges`` counted, memoised on the axis's scalars (not on its
        ranges, a tuple as long as the stripe count, hashed at every lookup). A subclass
        that overrides ``work_ranges`` overrides this with it."""
        return _axis_sizes(self.offset[axis], self.strides[axis], self.shape[axis],
                           self.stripes[axis], self.extent[axis])

    def _every_work_sizes(self) -> list[tuple[tuple[int, int], ...]]:
        """``work_sizes`` of every axis, in one pass over the fields (``_count`` asks for
        all of them). A subclass that overrides ``work_sizes`` overrides this with it."""
        return list(map(_axis_sizes, self.offset, self.strides, self.shape, self.stripes,
                        self.extent))

    def count_stripes(self) -> Counter:
        """How many stripes of each clipped shape there are (the edges make smaller ones), by
        the rows computed (``work_ranges``)."""
        return _count_stripes(self)

    def _count(self) -> Counter:
        # Each axis has few distinct clipped sizes (the edges), so the shapes are the product
        # of the per-axis sizes, each distinct, counted by the product of the per-axis counts.
        combos: list[tuple[tuple[int, ...], int]] = [((), 1)]
        for sizes in self._every_work_sizes():
            combos = [(shape + (size,), n * k) for shape, n in combos for size, k in sizes]
        # the shapes are distinct: no counting to do (nor Counter.__init__'s Python-level
        # update to run: the costing counts thousands of configs)
        out = _new_counter(Counter)
        dict.update(out, combos)
        return out

    def propagate(self, prop: Propagator, input_shape: Sequence[int]) -> "StripeConfig":
        return _propagate(self, prop, tuple(input_shape))

    def _propagate(self, prop: Propagator, input_shape: Sequence[int]) -> "StripeConfig":
        """The stripes of an input that the stripes of this output need.

        Shapes round up (a fractional shape means a stripe may straddle one more element);
        strides and offsets stay exact. An input axis follows the iteration of the output axis
        that drives it; an axis driven by none is read whole once per stripe.
        """
        if prop.output_dims != len(self.shape):
            raise PlannerError(f"propagator expects {prop.output_dims} dims, stripe has "
                               f"{len(self.shape)}")
        if prop.input_dims != len(input_shape):
            raise PlannerError(f"propagator produces {prop.input_dims} dims, input tensor has "
                               f"{len(input_shape)}")
        maps = prop.integer_axis_maps()
        if maps is not None and self._integer_positions():
            return self._propagate_integers(maps, input_shape)
        src = _clipped_single_stripes(self)
        if maps is not None and all(type(x) is int for x in src.offset) and \
                all(type(x) is int for x in src.strides):
            return src._propagate_integers(maps, input_shape)
        return src._propagate_exact(prop, input_shape)

    def _integer_positions(self) -> bool:
        """Whether every offset and stride is an int (kept on the config once found: the
        walks propagate the same configs through several propagators)."""
        found = self.__dict__.get("_ints")
        if found is None:
            found = self.__dict__["_ints"] = all(type(x) is int for x in self.offset) and \
                all(type(x) is int for x in self.strides)
        return found

    def _propagate_exact(self, prop: Propagator, input_shape: Sequence[int]) -> "StripeConfig":
        """``_propagate`` for any propagator and positions (Fractions included)."""
        raw_shape = list(prop.apply_shape(self.shape))
        strides = prop.apply_linear(self.strides)
        offset = list(prop.apply_offset(self.offset))
        order, stripes = [], []
        for i, driver in enumerate(prop.drivers()):
            if driver is None:
                order.append(0)
                stripes.append(1)
                continue
            j, lin = driver
            n = self.stripes[j]
            if n == 1:
                order.append(0)
                stripes.append(1)
            else:
                order.append(self.order[j])
                stripes.append(n)
            if lin <= 0:
                continue
            start = self.offset[j]
            if n == 1 and not _is_int(start):
                # one stripe: it really starts at floor(offset); propagate from there
                offset[i] = offset[i] - lin * (start - _floor(start))
            elif n > 1 and not (_is_int(start) and _is_int(self.strides[j])):
                # Stripe positions are floored; scaled by L a floored start can sit up to L
                # below the scaled exact start, so the window starts L earlier and is L longer.
                offset[i] = offset[i] - lin
                raw_shape[i] = raw_shape[i] + lin
                continue
            if n == 1 and not _is_int(lin) and \
                    sum(1 for v in prop.transform[i][:-1] if v != 0) == 1:
                # one stripe, at a known row: the rows it reads, exactly
                raw_shape[i] = min(raw_shape[i], _rows_read(offset[i], lin, prop.const(i),
                                                            self.shape[j]))
        shape = tuple(max(1, x if type(x) is int else math.ceil(x)) for x in raw_shape)
        offset = tuple(offset)
        fixed_strides = tuple(s if n > 1 else shp for s, n, shp in zip(strides, stripes, shape))
        return StripeConfig(shape, tuple(int(e) for e in input_shape), fixed_strides,
                            tuple(order), tuple(stripes), offset)

    def _propagate_integers(self, maps, input_shape: Sequence[int]) -> "StripeConfig":
        """``_propagate`` when the propagator and this config's positions are all integers
        (``Propagator.integer_axis_maps``): no floored starts to widen, no rounding; the
        same fields in less than half the time. An axis of one stripe is clipped to the
        tensor as it is read (``_clipped_single_stripes``, without building the clipped
        config)."""
        shape, strides, order, stripes, offset = [], [], [], [], []
        own_shape, own_offset, own_stripes = self.shape, self.offset, self.stripes
        for j, lin, const, off in maps:
            if j is None:
                size = max(1, const)
                shape.append(size)
                strides.append(size)
                order.append(0)
                stripes.append(1)
                offset.append(off)
                continue
            n = own_stripes[j]
            if n == 1:
                lo = own_offset[j]
                hi = lo + own_shape[j]
                lo_c, hi_c = max(lo, 0), min(hi, self.extent[j])
                rows = hi_c - lo_c if hi_c > lo_c else hi - lo
                if hi_c <= lo_c:
                    lo_c = lo
                size = max(1, lin * rows + const)
                shape.append(size)
                offset.append(lin * lo_c + off)
                strides.append(size)
                order.append(0)
                stripes.append(1)
            else:
                size = max(1, lin * own_shape[j] + const)
                shape.append(size)
                offset.append(lin * own_offset[j] + off)
                strides.append(lin * self.strides[j])
                order.append(self.order[j])
                stripes.append(n)
        return unchecked_config(tuple(shape), tuple(map(int, input_shape)), tuple(strides),
                                tuple(order), tuple(stripes), tuple(offset))

    def to_json(self) -> dict:
        def num(x: Number):
            return x if isinstance(x, int) else f"{x.numerator}/{x.denominator}"
        return {
            "shape": list(self.shape), "extent": list(self.extent),
            "strides": [num(s) for s in self.strides], "order": list(self.order),
            "stripes": list(self.stripes), "offset": [num(o) for o in self.offset],
        }


def unchecked_config(shape: tuple[int, ...], extent: tuple[int, ...],
                     strides: tuple[Number, ...], order: tuple[int, ...],
                     stripes: tuple[int, ...], offset: tuple[Number, ...]) -> StripeConfig:
    """A StripeConfig built without ``__init__``'s checks (a third of the time), for the
    search's hot paths, which derive every field from a checked config of the same rank.
    Its hash is kept from the start (the value ``__hash__`` keeps once asked): the search
    hashes nearly every config it builds, and the first ``__hash__`` of a config, which
    misses the kept value and catches the AttributeError, costs several times a build."""
    sc = object.__new__(StripeConfig)
    sc.__dict__.update(shape=shape, extent=extent, strides=strides, order=order,
                       stripes=stripes, offset=offset,
                       _hash=hash((shape, extent, strides, order, stripes, offset)))
    return sc


def _clipped_single_stripes(sc: StripeConfig) -> StripeConfig:
    """``sc`` with each axis of one stripe cut to the rows of its tensor it covers.

    A Part computes only rows of its output tensor: a stripe reaching past the tensor (a
    consumer's padding) computes its clipped range, and reads only what that range reads. A
    stride above the kernel makes the difference: a stride-2 1x1 convolution computing its 2
    output rows reads rows 0 and 2 of its input, not the 4 its unclipped 3-row stripe would
    span. An axis of several stripes keeps one shape for all of them; there the clipped
    stripes differ and the interior ones, unclipped, set the window. An axis whose stripe
    covers no row of the tensor is kept as it is (nothing computed, one element held).
    """
    cut = None
    for a, n in enumerate(sc.stripes):
        if n != 1:
            continue
        lo = math.floor(sc.offset[a])
        hi = lo + sc.shape[a]
        lo_c, hi_c = max(lo, 0), min(hi, sc.extent[a])
        if hi_c <= lo_c or (lo_c, hi_c) == (lo, hi):
            continue
        if cut is None:
            cut = [list(sc.shape), list(sc.strides), list(sc.offset)]
        cut[0][a] = cut[1][a] = hi_c - lo_c
        cut[2][a] = lo_c
    if cut is None:
        return sc
    return unchecked_config(tuple(cut[0]), sc.extent, tuple(cut[1]), sc.order, sc.stripes,
                            tuple(cut[2]))


@lru_cache(maxsize=200_000)
def _count_stripes(sc: StripeConfig) -> Counter:
    return sc._count()


@lru_cache(maxsize=200_000)
def _propagate(sc: StripeConfig, prop: Propagator, input_shape: tuple[int, ...]) -> StripeConfig:
    return sc._propagate(prop, input_shape)


def clear_caches() -> None:
    """Forget this module's memos (stripe ranges, spans, counts, propagations), so a benchmark
    times a cold search."""
    for fn in (_axis_ranges, _axis_max_span, _axis_sizes, _count_stripes,
               _propagate):
        fn.cache_clear()
