"""Which MIRROR_PADs the integer kernels take (``te_ops.lower_mirror_pad`` on a host, the
Ethos-U's copies): one rule the importer, the patterns and the TFLite support check share.

TVM's legalization of ``nn.pad`` knows the reflect mode only (it reads the converter's
"symmetric" mode as constant padding), so a SYMMETRIC MIRROR_PAD the patterns would leave to
it must be refused before it is converted; a REFLECT one it computes itself.
"""
from __future__ import annotations

from collections.abc import Sequence


def kernel_refusal(pads: Sequence[Sequence[int]]) -> str:
    """Why the integer kernels do not take a MIRROR_PAD by ``pads`` ((before, after) per
    axis), or ``""``: they mirror tensors of at most four axes, all but a 4-D tensor's batch
    (the NPU's height, width and depth)."""
    pads = [tuple(int(v) for v in p) for p in pads]
    if len(pads) > 4 or (len(pads) == 4 and pads[0] != (0, 0)):
        return (f"MIRROR_PAD by {pads}; the integer kernels mirror the height, width and "
                "depth of a tensor of at most 4 axes (a 4-D tensor's batch is not padded)")
    return ""
