"""An int16 SOFTMAX on the Ethos-U: TFLite Micro's int16 kernel (``compute.softmax16``) as
``npu_softmax.softmax16_ops`` lowers it, with the 16-bit LUTs Vela uses for it, over the
whole tensors at the addresses the plan gives them.

It reaches the stream as every NPU operator does (the pattern, the Ethos-U check, a planner
Part, a ``stream_ops`` row), so it is planned and may sit in a cascade that holds it whole.
What the pattern does not already refuse (``patterns.softmax16_refusals``: zero points,
output scale, beta) and the stream cannot express is named by :func:`refusals`, and the
operator stays on the host (or a TFLite operator for TFLite Micro).
"""
from __future__ import annotations

import math

from ethos_arch.ops import Op
from planner.parts import softmax16_work_bytes
from tvm_ethos.backends.ethos_u import npu_softmax
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot
from tvm_ethos.compute import softmax16


def is_softmax16(q) -> bool:
    """Whether ``q`` is a SOFTMAX of int16 codes (TFLite's int16 kernel, not the 8-bit one)."""
    return q.kind == Op.SOFTMAX and q.in_dtypes[0] == "int16"


def geometry(q) -> tuple[int, int]:
    """(rows, depth) of ``q``: its feature maps are 1 x rows x depth."""
    shape = tuple(int(s) for s in q.in_shapes[0])
    return math.prod(shape[:-1]), shape[-1]


def refusals(q) -> list[str]:
    """Why the stream cannot run the int16 SOFTMAX ``q`` (empty: it can), each naming what
    would: TFLite Micro's input multiplier shifts the difference left by at most
    ``MAX_LEFT_SHIFT`` bits, a row is one pooling kernel, the rows one feature map's width."""
    out = []
    beta = float(q.attrs.get("beta", 1.0))
    if beta > 0:
        _, shift = softmax16.input_multiplier(q.in_q[0][0], beta)
        if shift > softmax16.MAX_LEFT_SHIFT:
            out.append(f"input scale x beta = {q.in_q[0][0] * beta:g}; TFLite Micro shifts "
                       f"the input difference left by {shift} bits in int32, which overflows "
                       f"past {softmax16.MAX_LEFT_SHIFT} (a smaller input scale would fit)")
    rows, depth = geometry(q)
    if depth > npu_softmax.MAX_DEPTH:
        out.append(f"a depth of {depth}; the int16 SOFTMAX takes rows of at most "
                   f"{npu_softmax.MAX_DEPTH} values (its row maximum is one pooling kernel "
                   "across the row)")
    if rows > npu_softmax.MAX_ROWS:
        out.append(f"{rows} rows; the int16 SOFTMAX takes at most {npu_softmax.MAX_ROWS} (one "
                   "feature map width, as Vela's IFM H*W < 65536)")
    return out


def work_bytes(q) -> int:
    """The working memory of :func:`softmax16_ops` (``planner.parts.softmax16_work_bytes``),
    up to the last byte it writes, which the Plan holding the operator counts."""
    return softmax16_work_bytes(*geometry(q))


def softmax16_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The NPU operations of the int16 SOFTMAX ``q`` from its whole input ``operands[0]`` into
    its whole output ``ofm``, its working maps at ``em.work`` (``stream_ops.Emission``)."""
    rows, depth = geometry(q)
    return npu_softmax.softmax16_ops(rows, depth, q.in_q[0][0], float(q.attrs.get("beta", 1.0)),
                                     operands[0], ofm, em.work, em.flash, em.lut_address,
                                     em.block)
