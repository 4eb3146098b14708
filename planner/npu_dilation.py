"""The Ethos-U dilates a kernel by 1 or 2 along each axis: a larger dilation runs as a kernel
spread with zero taps, the NPU's own dilation taking the factor 2 out of an even one (Vela's
``fixup_dilation_gt2``). The taps it reads span the same rows and columns, so a window's
propagator is unchanged; the NPU computes the zero taps too, which its cost counts."""
from __future__ import annotations

from typing import NamedTuple

#: the dilations the NPU's kernel register takes along an axis
NPU_DILATIONS = (1, 2)


class NpuKernel(NamedTuple):
    """The kernel the NPU runs: its (height, width) with the zero taps, its own dilation,
    and the step (height, width) between the source taps in it."""

    kernel: tuple[int, int]
    dilation: tuple[int, int]
    spread: tuple[int, int]


def npu_kernel(kernel: tuple[int, int], dilation: tuple[int, int]) -> NpuKernel:
    """The NPU's form of a ``kernel`` (height, width) with ``dilation`` (height, width)."""
    sizes, dils, spreads = [], [], []
    for k, d in zip(kernel, dilation):
        k, d = int(k), int(d)
        hw = d if d in NPU_DILATIONS else (2 if d % 2 == 0 else 1)
        spread = d // hw
        sizes.append((k - 1) * spread + 1)
        dils.append(hw)
        spreads.append(spread)
    return NpuKernel(tuple(sizes), tuple(dils), tuple(spreads))
