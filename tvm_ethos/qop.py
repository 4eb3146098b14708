"""``QOp``: one quantized operator as the lowerings, the backends' checks and the stream
generators read it, whatever built it: ``patterns`` from a QDQ Relax region, or
``tflite_direct`` straight from a TFLite operator (no TVM). Kept apart from ``patterns``
so that a reader without TVM can build one."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ethos_arch.ops import Op, parse_op


@dataclass
class QOp:
    """One quantized operator read from a QDQ region."""

    kind: Op
    inputs: list  # relax Exprs of the integer activation inputs (empty when read without TVM)
    in_shapes: list[tuple]
    in_dtypes: list[str]
    out_shape: tuple
    out_dtype: str
    in_q: list[tuple[float, int]] = field(default_factory=list)  # (scale, zero point) per input
    out_q: tuple[float, int] | None = None
    weights: np.ndarray | None = None  # conv: HWIO (groups folded in I); fc: (N, K)
    w_scale: np.ndarray | None = None  # per output channel (or one value)
    w_zp: np.ndarray | None = None
    w_dtype: str | None = None
    bias: np.ndarray | None = None  # int32 per output channel
    bias_scale: np.ndarray | None = None
    attrs: dict = field(default_factory=dict)
    act_min: int = -128
    act_max: int = 127
    float_activation: str | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read (always a rejection)

    def __post_init__(self) -> None:
        # a kind given by its name (a test, a hand-built operator) is read into its Op here
        self.kind = parse_op(self.kind, "QOp.kind")

    @property
    def tflite_name(self) -> str:
        return self.kind.tflite_name

    @property
    def per_channel(self) -> bool:
        return self.w_scale is not None and np.asarray(self.w_scale).size > 1


def activation_name(layer: QOp | None) -> str | None:
    """The fused activation a planner Part of ``layer`` carries: None where its clamp is the
    whole output range, ``"relu"`` where it clamps at the output zero point only, else
    ``"clip"``."""
    if layer is None:
        return None
    info = np.iinfo(layer.out_dtype) if layer.out_dtype in ("int8", "uint8", "int16") else None
    if info is None or (layer.act_min <= info.min and layer.act_max >= info.max):
        return None
    zp = int(layer.out_q[1]) if layer.out_q is not None else 0
    if layer.act_min == zp and layer.act_max >= info.max:
        return "relu"
    return "clip"
