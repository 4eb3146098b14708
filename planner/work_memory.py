"""Working memory a Part's operation needs besides its operands and output.

A device may run one operator as several operations passing an intermediate through memory
of their own (an Ethos-U TRANSPOSE of several rotations, a RESIZE_BILINEAR enlarged before
its pool, an int16 LEAKY_RELU's two branches, an LSTM's gate buffers, an ARG_MAX's packed
codes). Whoever builds the Part knows how much (a code generator, or a ``planner.parts``
constructor); it puts that on the Part (the ``work`` attribute, a :class:`WorkMemory`), and
the Plan holding the Part counts it, live while the Plan runs, as the generated code uses
it, and lists it as one buffer (:func:`work_tensor`), from which reports and the code
generators' addresses read it. A Part without one needs none.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from planner.graph import Part

#: the Part attribute holding a :class:`WorkMemory`
WORK_ATTR = "work"


class WorkMemory(NamedTuple):
    """``fixed`` bytes whatever the stripe, plus ``per_element`` bytes for every element of
    the Part's compute stripe and ``per_position`` bytes for every position of it (an element
    of its shape without the last axis: an intermediate of another depth than the output's,
    the depth always whole), the sum rounded up to a multiple of ``align``."""

    fixed: int = 0
    per_element: int = 0
    align: int = 1
    per_position: int = 0

    def for_stripe(self, shape: Sequence[int]) -> int:
        """Bytes held while a stripe of ``shape`` (the whole output, unstriped) is computed."""
        n = self.fixed + self.per_element * math.prod(shape) + \
            self.per_position * math.prod(shape[:-1])
        return -(-n // self.align) * self.align


def stripe_work_bytes(part: Part, shape: Sequence[int]) -> int:
    """The working memory ``part`` holds computing stripes of ``shape`` (0: none)."""
    work = part.attr(WORK_ATTR)
    return 0 if work is None else work.for_stripe(shape)


def work_tensor(part_name: str) -> str:
    """The name of the buffer a Plan lists for the working memory of its Part
    ``part_name`` (a ``TensorConfig`` that is no tensor of the graph)."""
    return f"{part_name}:work"


def is_work_tensor(name: str) -> bool:
    """Whether a Plan's buffer ``name`` is a Part's working memory (:func:`work_tensor`)."""
    return name.endswith(":work")
