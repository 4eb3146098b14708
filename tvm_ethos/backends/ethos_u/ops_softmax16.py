"""An int16 SOFTMAX taken from the TFLite graph as one Ethos-U command stream (the importer
computes int16 SOFTMAX in float32, so it never reaches Relax): TFLite Micro's int16 kernel
(``compute.softmax16``) as ``npu_softmax.softmax16_ops`` lowers it, with the 16-bit LUTs
Vela uses for it.

What TFLite Micro's kernel requires is required here (int16 in and out, input zero point 0,
output (1/32768, 0)); anything else is refused with :class:`UnsupportedOperatorError`
naming what is in the way, and the operator stays a TFLite operator.
"""
from __future__ import annotations

import contextlib
import io
from typing import NamedTuple

from tvm_ethos.backends.ethos_u import npu_softmax
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, block_config
from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    SCRATCH_REGION,
    Flash,
    UnsupportedOperatorError,
    lut_address,
    npu_accelerator,
    vela_api,
)
from tvm_ethos.compute.quant import f32
from tvm_ethos.compute.softmax16 import input_multiplier

KIND = "SOFTMAX"
_INT16 = 7
#: the output quantization TFLite Micro's int16 SOFTMAX requires
OUTPUT_SCALE = 1 / 32768
#: the largest left shift of the input multiplier under which TFLite Micro's int32
#: ``difference << shift`` cannot overflow (a difference reaches -65535)
MAX_LEFT_SHIFT = 15


class Softmax16(NamedTuple):
    """One int16 SOFTMAX over the last axis: its shape, input scale (float32) and beta."""

    shape: tuple[int, ...]
    in_scale: float
    beta: float


def _up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def read_softmax16(graph, index: int) -> Softmax16:
    """The int16 SOFTMAX operator ``index`` of the source graph is, or
    UnsupportedOperatorError saying what in it the stream does not express."""
    import tflite

    g = graph.g
    op = g.Operators(index)
    name = f"operator {index} ({KIND})"
    if graph.kinds[index] != KIND:
        raise UnsupportedOperatorError(name, f"it is a {graph.kinds[index]}")
    ins, outs = graph.all_inputs(index), graph.writes[index]
    if len(ins) != 1 or len(outs) != 1 or ins[0] < 0:
        raise UnsupportedOperatorError(name, f"{len(ins)} inputs and {len(outs)} outputs; "
                                       "SOFTMAX takes one of each")
    x, y = g.Tensors(ins[0]), g.Tensors(outs[0])
    if x.Type() != _INT16 or y.Type() != _INT16:
        raise UnsupportedOperatorError(name, "its tensors are not both int16; the int16 "
                                       "stream takes int16 in and out")

    def quant(t, what):
        q = t.Quantization()
        if q is None or not q.ScaleLength():
            raise UnsupportedOperatorError(name, f"its {what} is not quantized")
        zp = int(q.ZeroPointAsNumpy()[0]) if q.ZeroPointLength() else 0
        return float(q.ScaleAsNumpy()[0]), zp

    in_scale, in_zp = quant(x, "input")
    out_scale, out_zp = quant(y, "output")
    if in_zp:
        raise UnsupportedOperatorError(name, f"input zero point {in_zp}; TFLite Micro's int16 "
                                       "SOFTMAX requires 0")
    if out_zp or abs(out_scale / OUTPUT_SCALE - 1) > 1e-3:
        raise UnsupportedOperatorError(name, f"output quantization ({out_scale:g}, {out_zp}); "
                                       "TFLite Micro's int16 SOFTMAX requires (1/32768, 0)")
    beta = 0.0
    table = op.BuiltinOptions()
    if table is not None:
        options = tflite.SoftmaxOptions()
        options.Init(table.Bytes, table.Pos)
        beta = float(options.Beta())
    if not beta > 0:
        raise UnsupportedOperatorError(name, f"beta {beta}; the stream takes a positive beta")
    _, shift = input_multiplier(f32(in_scale), f32(beta))
    if shift > MAX_LEFT_SHIFT:
        raise UnsupportedOperatorError(name, f"input scale x beta = {in_scale * beta:g}; "
                                       "TFLite Micro shifts the input difference left by "
                                       f"{shift} bits in int32, which overflows past "
                                       f"{MAX_LEFT_SHIFT}")
    shape = tuple(int(d) for d in x.ShapeAsNumpy()) if x.ShapeLength() else ()
    if not shape or min(shape) < 1:
        raise UnsupportedOperatorError(name, f"input shape {list(shape)}; the stream takes a "
                                       "tensor of at least one axis, every extent positive")
    y_shape = tuple(int(d) for d in y.ShapeAsNumpy()) if y.ShapeLength() else ()
    if y_shape != shape:
        raise UnsupportedOperatorError(name, f"output shape {list(y_shape)} is not the input's "
                                       f"{list(shape)}")
    npu_softmax.geometry16(shape)
    return Softmax16(shape, f32(in_scale), f32(beta))


def is_int16(graph, index: int) -> bool:
    """Whether operator ``index`` is a SOFTMAX of int16 codes (the form this module serves on
    the tflite-micro host, TFLite Micro's kernel, whether or not the stream takes it)."""
    if graph.kinds[index] != KIND:
        return False
    ins = graph.all_inputs(index)
    return bool(ins) and ins[0] >= 0 and graph.g.Tensors(ins[0]).Type() == _INT16


def refusal(graph, index: int) -> str:
    """Why the stream does not express operator ``index`` as an int16 SOFTMAX, or ``""``."""
    try:
        read_softmax16(graph, index)
    except UnsupportedOperatorError as err:
        return str(err)
    return ""


def softmax16_payload(sm: Softmax16, accelerator: str, names: tuple[str, str],
                      phases: tuple[int, int] = (0, 0)) -> EthosUPayload:
    """The command stream of ``sm`` for ``accelerator``; ``names`` are the source tensors'
    names of its input and output, ``phases`` their offsets modulo ``ALIGN`` in the stretch
    of an ethos-u operator that shares them (so both stretches start aligned)."""
    rows, n = npu_softmax.geometry16(sm.shape)
    nbytes = 2 * rows * n
    ifm_at = phases[0]
    ofm_at = _up(ifm_at + nbytes) + phases[1]
    work = _up(ofm_at + nbytes)
    acc = npu_accelerator(accelerator)
    api = vela_api()
    flash = Flash()
    ops = npu_softmax.softmax16_ops(
        rows, n, sm.in_scale, sm.beta, FmSlot(SCRATCH_REGION, ifm_at, (1, rows, n), "int16",
                                              None, 0),
        FmSlot(SCRATCH_REGION, ofm_at, (1, rows, n), "int16", None, 0), work, flash,
        lut_address(accelerator), lambda npu: block_config(npu, acc))
    with contextlib.redirect_stdout(io.StringIO()):  # Vela's notes on its default config
        words = api.npu_generate_register_command_stream(ops, acc)
        payload = api.npu_create_driver_payload(words, acc)
    extra = npu_softmax.work_bytes16(rows, n)
    return EthosUPayload(accelerator, bytes(payload), bytes(flash.data), work + extra, 0,
                         (ArenaTensor(names[0], sm.shape, "int16", ifm_at),),
                         (ArenaTensor(names[1], sm.shape, "int16", ofm_at),),
                         work_bytes=extra)
