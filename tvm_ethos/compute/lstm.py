"""UNIDIRECTIONAL_SEQUENCE_LSTM (int8 activations, int16 cell state) as one TE stage: TFLite
Micro's integer kernel, step by step, which the Ethos-U's stream (``ops_lstm``) computes too.

Every step reads the hidden and cell state the step before wrote, so the operator is no
element-wise map of its input: it is one ``te.extern`` whose TIR loops over the batches and
time steps, as TFLite Micro's ``lstm_eval`` does. Per step of a batch:

- each gate is two FULLY_CONNECTEDs into int16 at 2**-12 (the input with the gate's bias,
  the previous hidden state without), each rescaled with TFLite's double rounding and
  saturated, then added with saturation and passed through TFLite's int16 sigmoid (input,
  forget and output gates) or tanh (cell gate) into Q0.15;
- the cell state becomes ``forget * cell + input * cell gate``, each product rescaled by the
  multiplier TFLite Micro's prepare computes, saturated, added with saturation and clipped
  to the quantized cell clip;
- the hidden state is ``tanh(cell) * output gate`` rescaled into its int8 quantization,
  which is also the output of that step.

The int16 sigmoid and tanh are tables of one output per input code (65536 entries, made
with ``ethosu_stream.activation16``, TFLite's interpolation); the constants the planner
sees are the four gates' weights as one (4, cells, features + cells) int8 tensor and their
biases as one (4, cells) int32 tensor (``planner.parts.lstm``'s).

The hidden (int8) and cell (int16) states are variables of the compiled model, as TFLite
Micro's variable tensors are: two parameters of the kernel (``ConstPool.add_state``) it
reads before the first step and writes after the last, so the next run goes on from them.
Their constant values are where TFLite Micro's ``ResetVariableTensors`` leaves them (the
hidden state's zero point, a zero cell state), what the executor's ``reset_state`` restores.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from tvm import te, tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as T

from ethosu_stream import activation16
from tvm_ethos.compute.quant import f32, quantize_multiplier

#: the names of the two state parameters end so (``part_matchers``: no planner tensors; the
#: Part's own ``<part>:state`` block stands for them)
STATE_CONST_SUFFIXES = ("_hidden_state", "_cell_state")
#: the ExternFunc the importer calls for an LSTM (``tflite_converter``) and the pattern reads
PACKED_NAME = "tvm_ethos.unidirectional_sequence_lstm"
#: TFLite Micro's fixed scales of a gate's pre-activation (Q3.12) and activation (Q0.15)
GATE_INPUT_SCALE = 2.0 ** -12
GATE_OUTPUT_SCALE = 2.0 ** -15
#: the order of the quantization parameters in the importer's float64 constant
PARAMS = ("input_scale", "input_zero_point", "hidden_scale", "hidden_zero_point",
          "cell_scale", "cell_clip", "time_major", "input_gate_input_scale",
          "forget_gate_input_scale", "cell_gate_input_scale", "output_gate_input_scale",
          "input_gate_recurrent_scale", "forget_gate_recurrent_scale",
          "cell_gate_recurrent_scale", "output_gate_recurrent_scale")


class LstmQuantization(NamedTuple):
    """An LSTM's quantization: its input's and hidden state's (scale, zero point), the cell
    state's scale (a power of two), the quantized cell clip (None: none), whether its
    sequences are (time, batch, features), and each gate's input and recurrent weight
    scales (input, forget, cell, output gate order)."""

    input_q: tuple[float, int]
    hidden_q: tuple[float, int]
    cell_scale: float
    cell_clip: int | None
    time_major: bool
    input_scales: tuple[float, float, float, float]
    recurrent_scales: tuple[float, float, float, float]

    def to_params(self) -> np.ndarray:
        """The float64 vector the importer puts in the Relax call (:data:`PARAMS`' order)."""
        clip = -1.0 if self.cell_clip is None else float(self.cell_clip)
        return np.array([self.input_q[0], self.input_q[1], self.hidden_q[0], self.hidden_q[1],
                         self.cell_scale, clip, float(self.time_major), *self.input_scales,
                         *self.recurrent_scales], np.float64)

    @classmethod
    def from_params(cls, params: np.ndarray) -> "LstmQuantization":
        """The inverse of :meth:`to_params`; ValueError where ``params`` has another length."""
        p = [float(v) for v in np.asarray(params, np.float64).ravel()]
        if len(p) != len(PARAMS):
            raise ValueError(f"an LSTM's quantization has {len(PARAMS)} values, got {len(p)}")
        clip = None if p[5] < 0 else int(p[5])
        return cls((p[0], int(p[1])), (p[2], int(p[3])), p[4], clip, bool(p[6]),
                   tuple(p[7:11]), tuple(p[11:15]))


def _multiplier(real: float) -> tuple[int, int]:
    """TFLite's (Q31 multiplier, shift) of ``real``, computed in double."""
    m, s = quantize_multiplier(real)
    return int(m), int(s)


def _product_multiplier(a: float, b: float, out: float) -> tuple[int, int]:
    """An element-wise product's rescale, as TFLite Micro's prepare computes it."""
    return _multiplier(float(f32(a)) * float(f32(b)) / float(f32(out)))


def _fc_multiplier(in_scale: float, w_scale: float) -> tuple[int, int]:
    """A gate's FULLY_CONNECTED rescale into Q3.12: the scales' product in float32."""
    return _multiplier(float(np.float32(in_scale) * np.float32(w_scale)) / GATE_INPUT_SCALE)


def activation_table(sigmoid: bool, input_shift: int) -> np.ndarray:
    """TFLite Micro's int16 sigmoid or tanh of every int16 code (entry ``code + 32768``) whose
    real value is ``code * 2**input_shift`` (``-12``: a gate's Q3.12; the cell state's
    power otherwise), into Q0.15: the input rescaled to units of 1/(3 * 4096) as its
    ``Tanh`` / ``Logistic`` do for a power-of-two scale (``3 << s``, or 3 and a rounding
    right shift), then TFLite's table interpolated."""
    x = np.arange(-32768, 32768, dtype=np.int64)
    left = 12 + input_shift
    if left >= 0:
        scaled = x * (3 << left)
    else:
        scaled = (x * 3 + ((1 << -left) >> 1)) >> -left
    out = activation16.sigmoid16(scaled) if sigmoid else activation16.tanh16(scaled)
    return np.clip(out, -32768, 32767).astype(np.int16)


def _i64(v):
    return tirx.const(int(v), "int64")


def _rescale(acc, mult_shift: tuple[int, int]):
    """TFLite's ``MultiplyByQuantizedMultiplier`` of an int64 expression holding an int32:
    a saturating rounding doubling high multiply, then a rounding right shift."""
    mult, shift = mult_shift
    left, right = max(shift, 0), max(-shift, 0)
    ab = acc * _i64(1 << left) * _i64(mult)
    high = tirx.floordiv(ab + _i64(1 << 30), _i64(1 << 31))
    if right == 0:
        return high
    mask = _i64((1 << right) - 1)
    remainder = tirx.bitwise_and(high, mask)
    threshold = tirx.shift_right(mask, _i64(1)) + tirx.Select(high < _i64(0), _i64(1), _i64(0))
    return tirx.shift_right(high, _i64(right)) + tirx.Select(remainder > threshold, _i64(1),
                                                               _i64(0))


def _clamp(v, low: int, high: int):
    return tirx.max(tirx.min(v, _i64(high)), _i64(low))


def lower_lstm(op, inputs, pool, name: str) -> te.Tensor:
    """The LSTM ``op`` (a ``patterns.QOp`` of kind LSTM: ``weights`` (4, cells, features +
    cells) int8, ``bias`` (4, cells) int32, ``attrs["quantization"]`` an
    :class:`LstmQuantization`) over the int8 sequence ``inputs[0]``, its output sequence in
    TE (one extern stage named ``{name}_out``); its constants go to ``pool``, its states
    (hidden, then cell; ``(batches, cells)``) to ``pool`` as variables."""
    q: LstmQuantization = op.attrs["quantization"]
    x = inputs[0]
    shape = [int(s) for s in x.shape]
    steps, batches, features = shape if q.time_major else (shape[1], shape[0], shape[2])
    cells = int(op.weights.shape[1])
    weights = pool.add(f"{name}_weights", np.asarray(op.weights, np.int8))
    bias = pool.add(f"{name}_bias", np.asarray(op.bias, np.int32))
    p = int(round(np.log2(q.cell_scale)))
    tables = [pool.add(f"{name}_{what}_table", activation_table(what == "sigmoid", shift))
              for what, shift in (("sigmoid", -12), ("tanh", -12), ("cell_tanh", p))]
    fc_in = [_fc_multiplier(q.input_q[0], s) for s in q.input_scales]
    fc_rec = [_fc_multiplier(q.hidden_q[0], s) for s in q.recurrent_scales]
    q15 = GATE_OUTPUT_SCALE
    forget_mul = _product_multiplier(q.cell_scale, q15, q.cell_scale)
    input_mul = _product_multiplier(q15, q15, q.cell_scale)
    hidden_mul = _product_multiplier(q15, q15, q.hidden_q[0])
    zp_in, zp_h = q.input_q[1], q.hidden_q[1]
    hidden_state = pool.add_state(f"{name}{STATE_CONST_SUFFIXES[0]}",
                                  np.full((batches, cells), zp_h, np.int8))
    cell_state = pool.add_state(f"{name}{STATE_CONST_SUFFIXES[1]}",
                                np.zeros((batches, cells), np.int16))
    clip = q.cell_clip

    def row(b, t):
        return t * batches + b if q.time_major else b * steps + t

    def kernel(ins, outs):
        xs, w, bs, sig, tanh, cell_tanh, h_state, c_state = (T.buffer_proxy(b) for b in ins)
        out = T.buffer_proxy(outs[0])
        width = features + cells
        with IRBuilder() as ib:
            with T.seq_scope():
                cell = T.buffer_proxy(T.decl_buffer([batches * cells], "int64", scope="local"))
                gate = T.buffer_proxy(T.decl_buffer([4 * cells], "int64", scope="local"))
                acc = T.buffer_proxy(T.decl_buffer([2], "int64", scope="local"))
                with T.serial(0, batches * cells) as i:
                    cell[i] = c_state[i].astype("int64")
                with T.serial(0, batches) as b:
                    with T.serial(0, steps) as t:
                        with T.serial(0, 4 * cells) as kj:
                            k = tirx.floordiv(kj, cells)
                            acc[0] = bs[kj].astype("int64")
                            with T.serial(0, features) as f:
                                acc[0] = acc[0] + (xs[row(b, t) * features + f].astype("int64")
                                                   - _i64(zp_in)) * \
                                    w[kj * width + f].astype("int64")
                            acc[1] = _i64(0)
                            with T.serial(0, cells) as i:
                                # the step before's output; before the first, the state
                                h = tirx.if_then_else(
                                    t > 0, out[row(b, t - 1) * cells + i],
                                    h_state[b * cells + i]).astype("int64")
                                acc[1] = acc[1] + (h - _i64(zp_h)) * \
                                    w[kj * width + features + i].astype("int64")
                            pre_in, pre_rec = (
                                tirx.Select(k == 0, _rescale(acc[a], mults[0]),
                                            tirx.Select(k == 1, _rescale(acc[a], mults[1]),
                                                        tirx.Select(k == 2,
                                                                    _rescale(acc[a], mults[2]),
                                                                    _rescale(acc[a], mults[3]))))
                                for a, mults in ((0, fc_in), (1, fc_rec)))
                            pre = _clamp(_clamp(pre_in, -32768, 32767)
                                         + _clamp(pre_rec, -32768, 32767), -32768, 32767)
                            at = (pre + _i64(32768)).astype("int32")
                            gate[kj] = tirx.Select(k == 2, tanh[at].astype("int64"),
                                                   sig[at].astype("int64"))
                        with T.serial(0, cells) as j:
                            c0 = cell[b * cells + j]
                            kept = _clamp(_rescale(c0 * gate[cells + j], forget_mul),
                                          -32768, 32767)
                            added = _clamp(_rescale(gate[j] * gate[2 * cells + j], input_mul),
                                           -32768, 32767)
                            c1 = _clamp(kept + added, -32768, 32767)
                            if clip is not None:
                                c1 = _clamp(c1, -clip, clip)
                            cell[b * cells + j] = c1
                            th = cell_tanh[(cell[b * cells + j] + _i64(32768)).astype("int32")]
                            hid = _rescale(th.astype("int64") * gate[3 * cells + j],
                                           hidden_mul) + _i64(zp_h)
                            out[row(b, t) * cells + j] = _clamp(hid, -128, 127).astype("int8")
                    with T.serial(0, cells) as j:   # the states the next run starts from
                        h_state[b * cells + j] = out[row(b, steps - 1) * cells + j]
                        c_state[b * cells + j] = cell[b * cells + j].astype("int16")
        return ib.get()

    out_shape = [shape[0], shape[1], cells]
    return te.extern([out_shape], [x, weights, bias, *tables, hidden_state, cell_state],
                     kernel, dtype="int8",
                     name=f"{name}_out")
