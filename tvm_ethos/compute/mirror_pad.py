"""Which MIRROR_PADs the integer kernels take (``te_ops.lower_mirror_pad`` on a host, the
Ethos-U's copies): one rule the importer, the patterns and the TFLite support check share.

TVM's legalization of ``nn.pad`` knows the reflect mode only (it reads the converter's
"symmetric" mode as constant padding), so a SYMMETRIC MIRROR_PAD the patterns would leave to
it must be refused before it is converted; a REFLECT one it computes itself.
"""
from __future__ import annotations

from collections.abc import Sequence

#: the most axes the integer kernels mirror: the Ethos-U folds every axis before the last two
#: into its feature map's height (``npu_ops.shape3``), as Vela 5.2 takes 5-D MIRROR_PADs
MAX_AXES = 5


def kernel_refusal(pads: Sequence[Sequence[int]]) -> str:
    """Why the integer kernels do not take a MIRROR_PAD by ``pads`` ((before, after) per
    axis), or ``""``: they mirror any axis of a tensor of at most :data:`MAX_AXES` axes (a
    batch or an outer 5-D index as copies of whole inner blocks on the NPU)."""
    pads = [tuple(int(v) for v in p) for p in pads]
    if len(pads) > MAX_AXES:
        return (f"MIRROR_PAD by {pads}; the integer kernels mirror tensors of at most "
                f"{MAX_AXES} axes")
    return ""
