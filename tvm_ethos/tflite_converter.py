"""TVM's TFLite operator converter, extended to the quantized data-movement operators it refuses.

TVM 0.27's Relax importer (``tvm.relax.frontend.tflite``) converts PAD, PADV2, SPLIT, SPLIT_V,
DEPTH_TO_SPACE and RESIZE_NEAREST_NEIGHBOR, but ``OperatorConverter.check_unsupported_ops``
refuses any of them with quantized tensors: they are missing from its
``_SUPPORTED_QUANTIZED_OPS`` (the operators it has checked a QDQ lowering for). All six move or
copy int8 codes without arithmetic, so they are exact on the codes as long as the output has the
input's quantization (which TFLite's converter always gives them).

:class:`EthosOperatorConverter` is a subclass handed to ``from_tflite(op_converter=...)``: the
stock class and every other user of TVM in the process are untouched. It adds the six names to
its own ``_SUPPORTED_QUANTIZED_OPS`` and converts the quantized cases itself (float cases go to
TVM's converters):

* PAD / PADV2: ``dequantize -> nn.pad -> quantize`` (the QDQ form of concatenate), the fill value
  the real number of the code TFLite pads with (the zero point, or PADV2's constant code), so the
  pattern reads the zero point and the exact fill code back;
* SPLIT / SPLIT_V: one ``strided_slice`` on the int8 codes per output (reshape's form: integer
  domain, no QDQ), so every output is a single-output operator;
* DEPTH_TO_SPACE: TVM's own ``reshape -> permute_dims -> reshape`` on the codes (DCR order);
* RESIZE_NEAREST_NEIGHBOR: ``image.resize2d`` on the codes with a coordinate mode and rounding
  that name TFLite's index rule unambiguously (``tvm_ethos.patterns.NEAREST_MODES``);
* TRANSPOSE: ``permute_dims`` on the codes (the Ethos-U takes any permutation as strided
  copies, ``ops_movement.transpose_steps``);
* PACK: each input's codes reshaped to a size-1 axis, then ``concat`` of the codes (what the
  patterns read as RESHAPEs and one CONCATENATION; into more than four axes, a 4-D ``concat``
  of the codes read as rows, then a reshape to the output);
* PRELU: ``quantize(prelu(dequantize(x), dequantize(alpha)))`` over the last axis, its alpha
  the constant per-channel codes; an alpha varying along the height or width of a 4-D input:
  ``quantize(where(x >= 0, x, x * alpha))`` of the dequantized ``x``, alpha the
  ``1 x H|1 x W|1 x C|1`` map of codes (a QDQ region the patterns read back with TFLite's
  arithmetic, ``te_ops.lower_prelu``);
* ELU: TVM's float ``relu(x) - relu(1 - exp(x))`` between a dequantize and a quantize (the
  patterns read it as a table of TFLite's, ``compute.quant.elu_lut``);
* TILE: ``tile`` of the codes by its constant multiples;
* REVERSE_V2: ``flip`` of the codes along its one constant axis;
* MIRROR_PAD: ``nn.pad`` on the codes in reflect mode (REFLECT) or in a "symmetric" mode
  Relax has no legalization for (SYMMETRIC, only in the forms the patterns always take, to
  the integer kernels' ``te_ops.lower_mirror_pad``: ``mirror_pad.kernel_refusal``);
* UNPACK: SPLIT's form (one ``strided_slice`` per output), each slice reshaped without the
  unpacked axis (the last axis of a 4-D batch or of a reshape: a slice one channel deep per
  output, each reshaped to the output);
* BATCH_MATMUL: ``quantize(matmul(dequantize(a), dequantize(b)))``, an operand whose adj flag
  is set read through ``permute_dims`` of its last two axes inside the region (the patterns
  read the flags back; the integer kernel is TFLite's, ``te_ops.lower_batch_matmul``); a
  constant operand is the constant of its codes, dequantized in the region;
* RELU6 (quantized): ``quantize(clip(dequantize(x), 0, 6))`` with the *input's* quantization
  on both sides: TFLite Micro's kernel clamps the input codes to the codes of 0 and 6 in the
  input's quantization and writes them under the output's unread (TVM's converter requantizes
  to the output, which no TFLite Micro kernel does); the result is a RELU6 quantized alike,
  which the patterns read; a uint8 one (no TFLite Micro kernel) requantizes to the output as
  LiteRT's kernel does;
* ARG_MAX: ``argmax`` of the codes along its constant axis (a positive scale orders the codes
  as their real values), cast to the output's int32 (Relax's ``argmax`` gives int64);
* UNIDIRECTIONAL_SEQUENCE_LSTM (int8, in the forms the Ethos-U takes): one ``call_dps_packed``
  of ``compute.lstm.PACKED_NAME`` that only the Ethos-U claims (no host target has the
  kernel; its emulator runs ``compute.lstm``).

It also dequantizes the INT64 bias of TFLite's 16x8 convolutions and fully connected layers
(``dequantize``), which TVM's ``dequantize`` refuses, and clips a quantized operator's fused
RELU, RELU6 or RELU_N1_TO_1 at the codes TFLite's kernels clamp to
(``convert_qnn_fused_activation_function``).
"""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend.tflite.tflite_frontend import OperatorConverter, get_tensor_name

from tvm_ethos.backends.ethos_u.ops_lstm import Lstm, read_lstm
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph
from tvm_ethos.compute.lstm import PACKED_NAME as LSTM_PACKED_NAME
from tvm_ethos.compute.lstm import LstmQuantization
from tvm_ethos.compute.mirror_pad import kernel_refusal as mirror_pad_refusal
from tvm_ethos.compute.quant import (
    fused_activation_codes,
    prelu_alpha_codes,
    prelu_alpha_map,
)
from tvm_ethos.patterns import NEAREST_MODES

#: the quantized operators added to TVM's list
DATA_MOVEMENT_OPS = frozenset({"PAD", "PADV2", "SPLIT", "SPLIT_V", "DEPTH_TO_SPACE",
                               "RESIZE_NEAREST_NEIGHBOR", "SQUEEZE", "EXPAND_DIMS", "SLICE",
                               "STRIDED_SLICE", "TRANSPOSE", "PACK", "UNPACK",
                               "MIRROR_PAD", "PRELU", "ELU", "GELU",
                               "RELU_0_TO_1",
                               "REVERSE_V2", "TILE", "BATCH_MATMUL", "ARG_MAX"})
#: quantized operators converted for an NPU that takes them whole (an ``ethos-u`` package):
#: no host target has their integer kernel
NPU_ONLY_OPS = frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM"})


#: operators with a bias quantized by the input's and the weights' scales: their (input,
#: weights, bias) input indices
_BIASED = {"CONV_2D": (0, 1, 2), "DEPTHWISE_CONV_2D": (0, 1, 2), "FULLY_CONNECTED": (0, 1, 2),
           "TRANSPOSE_CONV": (2, 1, 3)}


def _static_shape(ty) -> list[int] | None:
    """A tensor type's shape as ints, None when it is no tensor or not static."""
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    if values is None:
        return None
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        return None


def _same_rows(got: list[int], want: list[int]) -> bool:
    """The same rows of the same width: TVM's FULLY_CONNECTED keeps its input's leading
    dimensions where TFLite flattens them (a pooled 1x1x1x64 input gives 1x1x1x10, declared
    1x10), and the operators after it inherit them."""
    return (got[-1:] == want[-1:]
            and int(np.prod(got, dtype=np.int64)) == int(np.prod(want, dtype=np.int64)))


def _refuse(msg: str):
    return tvm.error.OpNotImplemented(msg)


def _merged_unpack(shape: list[int], axis: int) -> tuple[tuple, int]:
    """UNPACK of ``axis`` (not the last) of ``shape``: the shape with the axis merged with
    the next one, and that next axis's length, the run each output is of the merged axis
    (output ``i`` the slice ``[i * run, (i + 1) * run)``, of exactly the output's shape)."""
    run = shape[axis + 1]
    return (*shape[:axis], shape[axis] * run, *shape[axis + 2:]), run


def _axis_first(rank: int, axis: int) -> list[int]:
    """The permutation that brings ``axis`` first, behind a 4-D input's batch (the NPU's
    feature maps have no batch above 1, so a permuted batch must stay where it is)."""
    lead = [0] if rank == 4 else []
    return lead + [axis] + [i for i in range(rank) if i != axis and i not in lead]


def _is_reshape(bb, expr) -> bool:
    """Whether ``expr`` is a ``reshape``, or a variable bound to one in ``bb``'s current
    block (a ``permute_dims`` of it and a reshape after read as TVM's DEPTH_TO_SPACE
    chain); TVM's RESHAPE converter leaves its call unbound."""
    value = bb.lookup_binding(expr) if isinstance(expr, relax.Var) else expr
    return isinstance(value, relax.Call) and getattr(value.op, "name", "") == "relax.reshape"


def _with_output_padding(expr, in_hw: list[int], kernel_hw: list[int], declared: list[int]):
    """``expr`` with its ``nn.conv2d_transpose`` (of an ``in_hw`` input by a ``kernel_hw``
    kernel) given the ``output_padding`` that makes its output ``declared`` (below the
    stride, as Relax requires), or ``expr`` itself when the output already is."""
    if not isinstance(expr, relax.Call):
        return expr
    if expr.op.name != "relax.nn.conv2d_transpose":
        args = [_with_output_padding(a, in_hw, kernel_hw, declared) for a in expr.args]
        if all(a.same_as(b) for a, b in zip(args, expr.args)):
            return expr
        return relax.Call(expr.op, args, expr.attrs, expr.ty_args)
    a = expr.attrs
    data, weight = expr.args
    (ih, iw), (kh, kw) = in_hw, kernel_hw
    (sh, sw), (pt, pl, pb, pr) = ([int(v) for v in a.strides], [int(v) for v in a.padding])
    extra = (declared[0] - ((ih - 1) * sh + kh - pt - pb),
             declared[1] - ((iw - 1) * sw + kw - pl - pr))
    if extra == (0, 0):
        return expr
    if not (0 <= extra[0] < sh and 0 <= extra[1] < sw):
        raise _refuse(f"TRANSPOSE_CONV declared {declared[0]}x{declared[1]}, which strides "
                      f"{(sh, sw)} and a {kh}x{kw} kernel over {ih}x{iw} cannot give")
    return relax.op.nn.conv2d_transpose(
        data, weight, strides=(sh, sw), padding=(pt, pl, pb, pr), output_padding=extra,
        dilation=[int(v) for v in a.dilation], groups=int(a.groups),
        data_layout=str(a.data_layout), kernel_layout=str(a.kernel_layout),
        out_layout=str(a.out_layout), out_dtype=str(a.out_dtype))


#: the real bounds (low, high; None: the type's top) of the fused activations TFLite's
#: ``CalculateActivationRangeQuantized`` quantizes
class EthosOperatorConverter(OperatorConverter):
    """``OperatorConverter`` that also takes the quantized data-movement operators."""

    _SUPPORTED_QUANTIZED_OPS = (OperatorConverter._SUPPORTED_QUANTIZED_OPS | DATA_MOVEMENT_OPS
                                | NPU_ONLY_OPS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.convert_map["NEG"] = self.convert_neg
        self.convert_map["ARG_MAX"] = self.convert_arg_max
        self._float_lstm = self.convert_map.get("UNIDIRECTIONAL_SEQUENCE_LSTM")
        self.convert_map["UNIDIRECTIONAL_SEQUENCE_LSTM"] = self.convert_quantized_lstm
        self.convert_map = {name: self._shape_checked(name, fn)
                            for name, fn in self.convert_map.items()}

    def _shape_checked(self, name: str, convert):
        """``convert`` whose result must have the shapes the model declares for the operator's
        outputs: TVM's converters compute shapes from the inputs and never compare, and a
        model whose declared shapes disagree is one TFLite's runtimes refuse."""
        def checked(op):
            ret = convert(op=op)
            if ret is None or self.bb is None:
                return ret
            ret = self.bb.normalize(ret)
            ty = ret.ty
            fields = list(ty.fields) if hasattr(ty, "fields") else [ty]
            outs = self.get_output_tensors(op)
            for out, info in zip(outs, fields):
                got = _static_shape(info)
                want = [int(d) for d in self.get_tensor_shape(out)]
                if got is not None and got != want and not _same_rows(got, want):
                    raise _refuse(f"{name}: output tensor {out.tensor_idx} "
                                  f"({out.tensor.Name().decode('utf-8', 'replace')!r}) is "
                                  f"declared {want}, but the operator's inputs give {got}")
            return ret

        return checked

    # ------------------------------------------------------------------ fused activations
    def convert_qnn_fused_activation_function(self, expr, fused_activation_fn, scale,
                                              zero_point, dtype):
        """A quantized operator's fused RELU, RELU6 or RELU_N1_TO_1 as the clip of the codes
        TFLite's kernels clamp to (``CalculateActivationRangeQuantized``: ``zero_point +
        round(f / scale)``, divided in float32 and rounded half away from zero, within the
        type). TVM's converter divides in double and rounds half to even, which moves a bound
        that falls on a tie (RELU_N1_TO_1 at scale 2, RELU6 at scale 12). Any other
        activation goes to TVM's converter."""
        codes = fused_activation_codes(fused_activation_fn, scale, zero_point, dtype)
        if codes is None:
            return super().convert_qnn_fused_activation_function(
                expr, fused_activation_fn, scale, zero_point, dtype)
        return relax.op.clip(expr, min=float(codes[0]), max=float(codes[1]))

    # ------------------------------------------------------------------ bias quantization
    def get_input_tensors(self, op):
        """TVM's inputs, with the quantization TFLite defines for a weighted operator's INT32
        bias given to a bias that carries none: scale input scale x weight scale, zero point
        0. TFLite's runtimes never read the bias's own parameters; without them TVM's
        converter builds the scale as a product at run time, which no pattern takes, so the
        operator fell to a float path a step off TFLite."""
        tensors = super().get_input_tensors(op)
        ix, iw, ib = _BIASED.get(self.get_op_code_str(op), (0, 1, 2))
        if len(tensors) <= ib or tensors[ib].tensor_idx < 0 or \
                tensors[ib].qnn_params is not None:
            return tensors
        x, w, b = tensors[ix], tensors[iw], tensors[ib]
        if x.qnn_params is None or w.qnn_params is None or \
                self.get_op_code_str(op) not in _BIASED:
            return tensors
        scale = (np.float32(x.qnn_params["scale"].value.numpy())
                 * np.asarray(w.qnn_params["scale"].value.numpy(), np.float32))
        zero = np.zeros(scale.shape, np.int32)
        b.qnn_params = {"scale": relax.const(scale, "float32"),
                        "zero_point": relax.const(zero if scale.ndim else 0, "int32"),
                        "axis": 0}
        return tensors

    def dequantize(self, expr, tensor):
        """TVM's dequantize, and for an int64 constant (a 16x8 operator's INT64 bias, which
        TVM's ``dequantize`` does not take) its values cast to float32 times the scale: the
        patterns read the int64 constant itself (``patterns``' wide bias), so the accumulator
        type TFLite's kernels choose by the bias type survives the import."""
        ty = getattr(expr, "ty", None) if hasattr(expr, "value") else None
        if str(getattr(ty, "dtype", "")) != "int64":
            return super().dequantize(expr, tensor)
        zero = np.asarray(tensor.qnn_params["zero_point"].value.numpy())
        if zero.any():
            raise _refuse(f"an INT64 bias with zero point(s) {zero.ravel()[:4].tolist()}; "
                          "TFLite's 16x8 kernels take 0")
        return relax.op.multiply(relax.op.astype(expr, "float32"), tensor.qnn_params["scale"])

    def convert_quantize(self, op):
        """TVM's QUANTIZE, and of integer codes into INT32 (which TVM's ``quantize`` does not
        take) ``astype(round(dequantize(x) / scale) + zero_point, "int32")``: the patterns
        read that form (``patterns``' wide quantize) as TFLite's integer requantization into
        int32 (``tflite_check`` admits it from INT16 only)."""
        (x,) = self.get_input_tensors(op)
        (out,) = self.get_output_tensors(op)
        if self.get_tensor_type_str(out.tensor.Type()) != "int32" or \
                self.get_tensor_type_str(x.tensor.Type()) == "float32":
            return super().convert_quantize(op)
        dq = self.dequantize(self.get_tensor_expr(x), x)
        q = out.qnn_params
        zero = np.asarray(q["zero_point"].value.numpy())
        if zero.size != 1 or np.asarray(q["scale"].value.numpy()).size != 1:
            raise _refuse("per-channel quantization of an INT32 output; TFLite's QUANTIZE "
                          "writes one scale and zero point")
        scaled = relax.op.round(relax.op.divide(dq, q["scale"]))
        shifted = relax.op.add(scaled, relax.const(float(zero.ravel()[0]), "float32"))
        return relax.op.astype(shifted, "int32")

    # ------------------------------------------------------------------ helpers
    def _qparams(self, tensor) -> tuple[float, int] | None:
        q = tensor.qnn_params
        if q is None:
            return None
        scale = np.asarray(q["scale"].value.numpy(), np.float32).ravel()
        zp = np.asarray(q["zero_point"].value.numpy()).astype(np.int64).ravel()
        if scale.size != 1 or zp.size != 1:
            raise _refuse("per-channel quantization of a data-movement operator's activation")
        return float(scale[0]), int(zp[0])

    def _same_quantization(self, name: str, inp, out) -> None:
        """TFLite's converter gives these operators the input's quantization on the output; the
        kernels copy codes, so another output quantization would silently change values."""
        qi, qo = self._qparams(inp), self._qparams(out)
        if qi != qo:
            raise _refuse(f"{name} with input quantization {qi} and output {qo}: the operator "
                          "copies int8 codes, so both must be equal (re-export the model with "
                          "TFLite's converter, which makes them equal)")

    def _const_ints(self, tensor, what: str) -> np.ndarray:
        if self.has_expr(tensor.tensor_idx):
            raise _refuse(f"{what} is computed at run time; tvm-ethos needs a constant")
        return np.asarray(self.get_tensor_value(tensor)).astype(np.int64)

    # ------------------------------------------------------------------ PAD / PADV2
    def convert_transpose_conv(self, op):
        """TVM's TRANSPOSE_CONV with its fused activation, which TVM's converter drops (TFLite's
        kernels clamp to it): the clamp on the quantized output, as TVM's conv applies it. Its
        output is the declared one: TVM's converter sizes it ``(in - 1) * stride + kernel -
        padding``, short of TFLite's by ``stride - kernel`` where the kernel is below the
        stride (SAME: ``in * stride``), which ``output_padding`` adds back (rows only the bias
        reaches, as in TFLite's kernel)."""
        from tflite.TransposeConvOptions import TransposeConvOptions

        out_t, (_, w, x) = self.get_output_tensors(op)[0], self.get_input_tensors(op)[:3]
        out = _with_output_padding(
            super().convert_transpose_conv(op),
            *([int(d) for d in self.get_tensor_shape(t)[sl]]
              for t, sl in ((x, slice(1, 3)), (w, slice(1, 3)), (out_t, slice(1, 3)))))
        table = op.BuiltinOptions()
        opts = TransposeConvOptions()
        opts.Init(table.Bytes, table.Pos)
        act = opts.FusedActivationFunction()
        (y,) = self.get_output_tensors(op)
        if y.qnn_params is None:
            return self.convert_fused_activation_function(out, act)
        return self.convert_qnn_fused_activation_function(
            out, act, scale=float(y.qnn_params["scale"].value.numpy()),
            zero_point=int(y.qnn_params["zero_point"].value.numpy()),
            dtype=self.get_tensor_type_str(y.tensor.Type()))

    def convert_pad(self, op):
        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return super().convert_pad(op)
        (out,) = self.get_output_tensors(op)
        name = "PADV2" if len(inputs) == 3 else "PAD"
        self._same_quantization(name, inputs[0], out)
        scale, zp = self._qparams(out)
        paddings = self._const_ints(inputs[1], f"the paddings of {name}").reshape(-1, 2)
        if (paddings < 0).any():
            raise _refuse(f"{name} with negative paddings {paddings.tolist()}")
        code = zp
        if len(inputs) == 3:
            if self._qparams(inputs[2]) != (scale, zp):
                raise _refuse("PADV2 constant_values quantized unlike its output; TFLite "
                              "requires them equal")
            code = int(self._const_ints(inputs[2], "PADV2's constant_values").ravel()[0])
        x = self.dequantize(self.get_expr(inputs[0].tensor_idx), inputs[0])
        padded = relax.op.nn.pad(x, pad_width=[int(v) for v in paddings.ravel()],
                                 pad_value=float((code - zp) * np.float64(scale)))
        return self.quantize(padded, out)

    # ------------------------------------------------------------------ SPLIT / SPLIT_V
    def _slices(self, in_tensor, axis: int, sizes):
        x = self.get_expr(in_tensor.tensor_idx)
        rank = len(self.get_tensor_shape(in_tensor))
        axis = axis + rank if axis < 0 else axis
        outs, start = [], 0
        for s in sizes:
            outs.append(self.bb.emit(relax.op.strided_slice(x, axes=[axis], begin=[start],
                                                            end=[start + int(s)])))
            start += int(s)
        return outs[0] if len(outs) == 1 else relax.Tuple(outs)

    def _split_outputs(self, op, name: str, x):
        """The outputs of a quantized SPLIT/SPLIT_V, each checked to share ``x``'s
        quantization (the slices copy the int8 values as they are)."""
        outs = self.get_output_tensors(op)
        for o in outs:
            self._same_quantization(name, x, o)
        return outs

    def convert_split(self, op):
        inputs = self.get_input_tensors(op)
        x = inputs[1]
        if x.qnn_params is None:
            return super().convert_split(op)
        outs = self._split_outputs(op, "SPLIT", x)
        axis = int(self._const_ints(inputs[0], "SPLIT's axis").ravel()[0])
        shape = [int(d) for d in self.get_tensor_shape(x)]
        size = shape[axis]
        if size % len(outs):
            raise _refuse(f"SPLIT of {size} elements into {len(outs)} parts; TFLite needs an "
                          "even split")
        return self._slices(x, axis, [size // len(outs)] * len(outs))

    def convert_split_v(self, op):
        inputs = self.get_input_tensors(op)
        x = inputs[0]
        if x.qnn_params is None:
            return super().convert_split_v(op)
        outs = self._split_outputs(op, "SPLIT_V", x)
        sizes = self._const_ints(inputs[1], "SPLIT_V's size_splits").ravel()
        axis = int(self._const_ints(inputs[2], "SPLIT_V's axis").ravel()[0])
        shape = [int(d) for d in self.get_tensor_shape(x)]
        if (sizes == -1).sum() == 1:
            sizes = np.where(sizes == -1, shape[axis] - sizes[sizes != -1].sum(), sizes)
        if (sizes < 0).any() or sizes.sum() != shape[axis] or len(sizes) != len(outs):
            raise _refuse(f"SPLIT_V sizes {sizes.tolist()} do not split dimension {axis} of "
                          f"{shape} into {len(outs)} parts")
        return self._slices(x, axis, sizes.tolist())

    # ------------------------------------------------------------------ DEPTH_TO_SPACE
    def convert_depth_to_space(self, op):
        (x,) = self.get_input_tensors(op)
        if x.qnn_params is not None:
            self._same_quantization("DEPTH_TO_SPACE", x, self.get_output_tensors(op)[0])
        return super().convert_depth_to_space(op)

    # ------------------------------------------------------------------ RESIZE_NEAREST_NEIGHBOR
    def convert_resize_nearest_neighbor(self, op):
        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return super().convert_resize_nearest_neighbor(op)
        from tflite.ResizeNearestNeighborOptions import ResizeNearestNeighborOptions

        (out,) = self.get_output_tensors(op)
        self._same_quantization("RESIZE_NEAREST_NEIGHBOR", inputs[0], out)
        ac = hp = False
        table = op.BuiltinOptions()
        if table is not None:
            opts = ResizeNearestNeighborOptions()
            opts.Init(table.Bytes, table.Pos)
            ac, hp = bool(opts.AlignCorners()), bool(opts.HalfPixelCenters())
        if (ac, hp) not in NEAREST_MODES:
            raise _refuse("RESIZE_NEAREST_NEIGHBOR with both align_corners and "
                          "half_pixel_centers; TensorFlow refuses that combination, re-export "
                          "with one of them")
        size = self._const_ints(inputs[1], "RESIZE_NEAREST_NEIGHBOR's size").ravel()
        mode, rounding = NEAREST_MODES[(ac, hp)]
        return relax.op.image.resize2d(self.get_expr(inputs[0].tensor_idx),
                                       tuple(int(v) for v in size), None, "NHWC",
                                       "nearest_neighbor", mode, rounding)

    # ------------------------------------------------------------------ SQUEEZE / EXPAND_DIMS
    def _code_reshape(self, op, name: str):
        """The codes reshaped to the declared output shape (no value changes)."""
        x = self.get_input_tensors(op)[0]
        (out,) = self.get_output_tensors(op)
        self._same_quantization(name, x, out)
        shape = tuple(int(d) for d in self.get_tensor_shape(out))
        return relax.op.reshape(self.get_expr(x.tensor_idx), shape)

    def convert_squeeze(self, op):
        if self.get_input_tensors(op)[0].qnn_params is None:
            return super().convert_squeeze(op)
        return self._code_reshape(op, "SQUEEZE")

    def convert_expand_dims(self, op):
        if self.get_input_tensors(op)[0].qnn_params is None:
            return super().convert_expand_dims(op)
        return self._code_reshape(op, "EXPAND_DIMS")

    # ------------------------------------------------------------------ SLICE / STRIDED_SLICE
    def _box_slice(self, op, name: str, begin, end, shape_out, strides=None):
        """Every ``strides``-th element (default 1) of the box ``[begin, end)`` of the input's
        codes: one ``strided_slice`` per cut axis (each one SPLIT's form, a stride only where
        it is not 1), then the declared output shape."""
        x = self.get_input_tensors(op)[0]
        (out,) = self.get_output_tensors(op)
        self._same_quantization(name, x, out)
        expr = self.get_expr(x.tensor_idx)
        shape = [int(d) for d in self.get_tensor_shape(x)]
        for axis, (b, e) in enumerate(zip(begin, end)):
            s = strides[axis] if strides else 1
            if not 0 <= b < e <= shape[axis]:
                raise _refuse(f"{name} of [{b}, {e}) on dimension {axis} of {shape}")
            e = b + (e - b - 1) // s * s + 1   # the last element read ends the box
            s = 1 if e - b == 1 else s          # one element: no stride to take
            if s != 1:
                expr = self.bb.emit(relax.op.strided_slice(expr, axes=[axis], begin=[b],
                                                           end=[e], strides=[s]))
            elif (b, e) != (0, shape[axis]):
                expr = self.bb.emit(relax.op.strided_slice(expr, axes=[axis], begin=[b],
                                                           end=[e]))
        return relax.op.reshape(expr, tuple(int(d) for d in shape_out))

    def convert_slice(self, op):
        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return super().convert_slice(op)
        shape = [int(d) for d in self.get_tensor_shape(inputs[0])]
        begin = self._const_ints(inputs[1], "SLICE's begin").ravel().tolist()
        size = self._const_ints(inputs[2], "SLICE's size").ravel().tolist()
        end = [d if n == -1 else b + n for b, n, d in zip(begin, size, shape)]
        out = self.get_tensor_shape(self.get_output_tensors(op)[0])
        return self._box_slice(op, "SLICE", begin, end, out)

    def convert_strided_slice(self, op):
        """Positive strides (a negative one reads backwards, which no slice here does);
        begin/end masks and negative indices as TFLite reads them, shrunk axes dropped by the
        final reshape."""
        from tflite.StridedSliceOptions import StridedSliceOptions

        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return super().convert_strided_slice(op)
        opts = StridedSliceOptions()
        table = op.BuiltinOptions()
        if table is not None:
            opts.Init(table.Bytes, table.Pos)
        masks = (opts.BeginMask(), opts.EndMask(), opts.ShrinkAxisMask()) if table else (0,) * 3
        if table is not None and (opts.EllipsisMask() or opts.NewAxisMask()
                                  or getattr(opts, "Offset", lambda: False)()):
            raise _refuse("STRIDED_SLICE with an ellipsis, a new axis or offset; tvm-ethos "
                          "takes begin, end and shrink masks")
        shape = [int(d) for d in self.get_tensor_shape(inputs[0])]
        begin = self._const_ints(inputs[1], "STRIDED_SLICE's begin").ravel().tolist()
        end = self._const_ints(inputs[2], "STRIDED_SLICE's end").ravel().tolist()
        strides = self._const_ints(inputs[3], "STRIDED_SLICE's strides").ravel().tolist()
        if any(v < 1 for v in strides):
            raise _refuse(f"STRIDED_SLICE with strides {strides}; tvm-ethos slices with "
                          "positive strides")
        bm, em, sm = masks
        box_b, box_e = [], []
        for i, d in enumerate(shape):
            b = 0 if bm >> i & 1 else (begin[i] + d if begin[i] < 0 else begin[i])
            e = d if em >> i & 1 else (end[i] + d if end[i] < 0 else end[i])
            b = min(max(b, 0), d)
            e = b + 1 if sm >> i & 1 else min(max(e, 0), d)
            box_b.append(b)
            box_e.append(e)
        out = self.get_tensor_shape(self.get_output_tensors(op)[0])
        return self._box_slice(op, "STRIDED_SLICE", box_b, box_e, out, strides)

    # ------------------------------------------------------------------ TRANSPOSE
    def convert_transpose(self, op):
        """``permute_dims`` on the codes, the permutation a constant; the output must keep
        the input's quantization (the operator copies codes)."""
        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return super().convert_transpose(op)
        self._same_quantization("TRANSPOSE", inputs[0], self.get_output_tensors(op)[0])
        perm = self._const_ints(inputs[1], "TRANSPOSE's permutation").ravel().tolist()
        return relax.op.permute_dims(self.get_expr(inputs[0].tensor_idx), perm)

    # ------------------------------------------------------------------ PRELU
    def convert_prelu(self, op):
        """The QDQ region of PRELU: the constant alpha must be one value per channel (or one
        value), over the last axis, or a map over the height, width and depth of a 4-D input
        (``compute.quant.prelu_alpha_map``), quantized per tensor
        (``tflite_support.form_refusal``)."""
        x, alpha = self.get_input_tensors(op)[:2]
        if x.qnn_params is None:
            return super().convert_prelu(op)
        (out,) = self.get_output_tensors(op)
        shape = [int(d) for d in self.get_tensor_shape(x)]
        values = None if self.has_expr(alpha.tensor_idx) else \
            np.asarray(self.get_tensor_value(alpha))
        codes = None if values is None else prelu_alpha_codes(values, shape)
        if codes is None and values is not None and alpha.qnn_params is not None:
            alpha_map = prelu_alpha_map(values, shape)
            if alpha_map is not None:
                return self._prelu_map(x, alpha, alpha_map, out)
        if codes is None or alpha.qnn_params is None:
            raise _refuse("PRELU whose alpha is no quantized constant of one value per channel "
                          "or one map over the height, width and depth")
        scale, zp = self._qparams(alpha)
        rank = len(shape)
        dq_alpha = relax.op.dequantize(relax.const(codes), relax.const(scale, "float32"),
                                       relax.const(zp, codes.dtype.name), axis=0)
        core = relax.op.nn.prelu(self.dequantize(self.get_expr(x.tensor_idx), x), dq_alpha,
                                 axis=rank - 1)
        return self.quantize(core, out)

    def _prelu_map(self, x, alpha, alpha_map: np.ndarray, out):
        """``quantize(where(dq >= 0, dq, dq * dequantize(alpha)))``, alpha the ``1 x h x w x c``
        map of codes broadcast against the dequantized input ``dq`` (emitted once: the
        pattern reads the same ``dq`` in all three places)."""
        scale, zp = self._qparams(alpha)
        codes = alpha_map[None]
        dq = self.bb.emit(self.dequantize(self.get_expr(x.tensor_idx), x))
        dq_alpha = relax.op.dequantize(relax.const(codes), relax.const(scale, "float32"),
                                       relax.const(zp, codes.dtype.name))
        core = relax.op.where(relax.op.greater_equal(dq, relax.const(0.0, "float32")), dq,
                              relax.op.multiply(dq, dq_alpha))
        return self.quantize(core, out)

    # ------------------------------------------------------------------ ELU
    def convert_elu(self, op):
        """TVM's float ELU on the dequantized input, quantized to the output."""
        (x,) = self.get_input_tensors(op)
        if x.qnn_params is None:
            return super().convert_elu(op)
        (out,) = self.get_output_tensors(op)
        dq = self.bb.emit(self.dequantize(self.get_expr(x.tensor_idx), x))
        one = relax.const(1.0, "float32")
        core = relax.op.add(
            relax.op.multiply(relax.const(-1.0, "float32"),
                              relax.op.nn.relu(relax.op.subtract(one, relax.op.exp(dq)))),
            relax.op.nn.relu(dq))
        return self.quantize(core, out)

    # ------------------------------------------------------------------ RELU6
    def convert_relu6(self, op):
        """TFLite Micro's quantized RELU6: the input codes clamped to those of 0 and 6 in the
        input's quantization, the output's quantization unread (see the module's notes)."""
        (x,) = self.get_input_tensors(op)
        if x.qnn_params is None:
            return super().convert_relu6(op)
        dq = self.dequantize(self.get_expr(x.tensor_idx), x)
        if self.get_tensor_type_str(x.tensor.Type()) == "uint8":
            # TFLite Micro has no uint8 RELU6; LiteRT's kernel (QuantizedReluX) requantizes
            # to the output as RELU_N1_TO_1 does
            (out,) = self.get_output_tensors(op)
            return self.quantize(relax.op.clip(dq, min=0, max=6), out)
        return self.quantize(relax.op.clip(dq, min=0, max=6), x)

    # ------------------------------------------------------------------ NEG
    def convert_neg(self, op):
        """TFLite's quantized NEG negates the codes and reads neither quantization (the
        lowest code wraps to itself): ``negative`` of the codes, not of their real values
        (TVM's converter negates the dequantized input, which LiteRT's kernel does not)."""
        (x,) = self.get_input_tensors(op)
        if x.qnn_params is None:
            return self._convert_unary_elemwise(op, relax.op.negative)
        return relax.op.negative(self.get_expr(x.tensor_idx))

    # ------------------------------------------------------------------ ARG_MAX
    def convert_arg_max(self, op):
        """``argmax`` of the codes along the constant axis, the first largest code's index
        (TFLite's tie rule), cast to the output's type: a positive scale orders the codes as
        the real values, so no dequantize is needed (TVM's converter refuses a quantized
        ARG_MAX)."""
        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return self._convert_arg_min_max(op, relax.op.argmax)
        (out,) = self.get_output_tensors(op)
        dtype = self.get_tensor_type_str(out.tensor.Type())
        if dtype not in ("int32", "int64"):
            raise _refuse(f"ARG_MAX into {dtype}; TFLite's kernel writes int32 or int64")
        axis = self._const_ints(inputs[1], "ARG_MAX's axis").ravel()
        if axis.size != 1:
            raise _refuse(f"ARG_MAX along {axis.tolist()}; TFLite takes one axis")
        rank = len(self.get_tensor_shape(inputs[0]))
        if not -rank <= int(axis[0]) < rank:
            raise _refuse(f"ARG_MAX along axis {int(axis[0])} of a {rank}-D tensor")
        index = relax.op.argmax(self.get_expr(inputs[0].tensor_idx), axis=int(axis[0]) % rank,
                                keepdims=False)
        return index if dtype == "int64" else relax.op.astype(self.bb.emit(index), dtype)

    # ------------------------------------------------------------------ LSTM
    def convert_quantized_lstm(self, op):
        """An int8 UNIDIRECTIONAL_SEQUENCE_LSTM in the form the Ethos-U's stream takes
        (``ops_lstm.read_lstm``: no CIFG, peephole, projection or layer normalization, int8
        activations, an int16 cell at a power-of-two scale) as one ``call_dps_packed`` of
        :data:`~tvm_ethos.compute.lstm.PACKED_NAME` on the input sequence, the gates'
        weights (4, cells, features + cells) and biases (4, cells) and the quantization
        (``LstmQuantization.to_params``) as constants: the form the ``lstm`` pattern claims
        for the Ethos-U, whose emulator computes it with ``compute.lstm``. A float LSTM
        goes to TVM's converter; any other form is refused with the reason."""
        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None and self._float_lstm is not None:
            return self._float_lstm(op)
        graph = SourceGraph(self.model)
        index = next(i for i in range(self.subgraph.OperatorsLength())
                     if self.subgraph.Operators(i)._tab.Pos == op._tab.Pos)
        try:
            lstm = read_lstm(graph, index)
        except UnsupportedOperatorError as err:
            why = str(err).removeprefix(f"the Ethos-U stream generator cannot express "
                                        f"{err.kind}: ")
            raise _refuse(f"{why}: the Ethos-U does not take it, and the llvm host has no "
                          "quantized LSTM kernel (target ethos-u, = ethos-u,tflite-micro, keeps "
                          "it a TFLite operator)") from None
        weights, bias, params = lstm_constants(lstm)
        out_shape = list(lstm.sequence_shape(lstm.cells))
        return relax.call_dps_packed(
            LSTM_PACKED_NAME,
            [self.get_expr(inputs[0].tensor_idx), relax.const(weights), relax.const(bias),
             relax.const(params)],
            relax.TensorType(out_shape, "int8"))

    # ------------------------------------------------------------------ GELU
    def convert_gelu(self, op):
        """TVM's float GELU (``gelu``, or ``gelu_tanh`` for the approximate form) on the
        dequantized input, quantized to the output; the patterns read it as TFLite's table
        (``compute.quant.gelu_lut``)."""
        from tflite.BuiltinOptions import BuiltinOptions
        from tflite.GeluOptions import GeluOptions

        (x,) = self.get_input_tensors(op)
        if x.qnn_params is None:
            return super().convert_gelu(op)
        (out,) = self.get_output_tensors(op)
        opts, table = GeluOptions(), op.BuiltinOptions()
        # options of another type are not read, as TFLite's parser reads none (exact form)
        own = table is not None and op.BuiltinOptionsType() == BuiltinOptions.GeluOptions
        if own:
            opts.Init(table.Bytes, table.Pos)
        approximate = own and opts.Approximate()
        gelu = relax.op.nn.gelu_tanh if approximate else relax.op.nn.gelu
        dq = self.bb.emit(self.dequantize(self.get_expr(x.tensor_idx), x))
        return self.quantize(gelu(dq), out)

    # ------------------------------------------------------------------ REVERSE_V2
    def convert_reverse_v2(self, op):
        """``flip`` of the codes along the one constant axis; the output must keep the input's
        quantization (the kernel copies codes)."""
        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return super().convert_reverse_v2(op)
        self._same_quantization("REVERSE_V2", inputs[0], self.get_output_tensors(op)[0])
        axes = self._const_ints(inputs[1], "REVERSE_V2's axis").ravel().tolist()
        if len(axes) != 1:
            raise _refuse(f"REVERSE_V2 over axes {axes}; TFLite reverses one axis")
        return relax.op.flip(self.get_expr(inputs[0].tensor_idx), int(axes[0]))

    # ------------------------------------------------------------------ TILE
    def convert_tile(self, op):
        """``tile`` of the codes by the constant multiples; the output must keep the input's
        quantization (the kernel copies codes)."""
        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return super().convert_tile(op)
        self._same_quantization("TILE", inputs[0], self.get_output_tensors(op)[0])
        reps = self._const_ints(inputs[1], "TILE's multiples").ravel().tolist()
        if any(r < 1 for r in reps):
            raise _refuse(f"TILE by {reps}; the multiples must be at least 1")
        return relax.op.tile(self.get_expr(inputs[0].tensor_idx), [int(r) for r in reps])

    # ------------------------------------------------------------------ MIRROR_PAD
    def convert_mirror_pad(self, op):
        """REFLECT padding of the codes (``nn.pad``'s reflect mode: the edge not repeated) or
        SYMMETRIC (the edge repeated: ``pad_mode="symmetric"``, which TVM's legalization
        would read as constant padding, so only in the forms the patterns take and lower
        exactly, ``mirror_pad.kernel_refusal``); the output must keep the input's
        quantization (the kernel copies codes)."""
        from tflite.MirrorPadOptions import MirrorPadOptions

        inputs = self.get_input_tensors(op)
        if inputs[0].qnn_params is None:
            return super().convert_mirror_pad(op)
        self._same_quantization("MIRROR_PAD", inputs[0], self.get_output_tensors(op)[0])
        opts = MirrorPadOptions()
        table = op.BuiltinOptions()
        if table is not None:
            opts.Init(table.Bytes, table.Pos)
        symmetric = table is not None and opts.Mode() != 0
        paddings = self._const_ints(inputs[1], "the paddings of MIRROR_PAD").reshape(-1, 2)
        shape = [int(d) for d in self.get_tensor_shape(inputs[0])]
        mode, edge = ("SYMMETRIC", 0) if symmetric else ("REFLECT", 1)
        if (paddings < 0).any() or any(max(p) > d - edge for p, d in zip(paddings.tolist(),
                                                                          shape)):
            raise _refuse(f"MIRROR_PAD of {shape} by {paddings.tolist()}; {mode} takes "
                          f"paddings from 0 to the dimension{' less one' if edge else ''}")
        why = mirror_pad_refusal(paddings.tolist()) if symmetric else ""
        if why:
            raise _refuse(f"{why}, in SYMMETRIC mode (TVM's legalization pads in REFLECT "
                          "mode only)")
        return relax.op.nn.pad(self.get_expr(inputs[0].tensor_idx),
                               pad_width=[int(v) for v in paddings.ravel()],
                               pad_mode="symmetric" if symmetric else "reflect")

    # ------------------------------------------------------------------ PACK / UNPACK
    def convert_pack(self, op):
        """The codes of every input reshaped to the output's rank (a size-1 axis at the pack
        axis), then concatenated there: every tensor must share one quantization (TFLite's
        kernel copies codes)."""
        from tflite.PackOptions import PackOptions

        inputs = self.get_input_tensors(op)
        shapes = {tuple(int(d) for d in self.get_tensor_shape(x)) for x in inputs}
        if len(shapes) != 1:
            raise _refuse(f"PACK of inputs of different shapes {sorted(shapes)}: TFLite packs "
                          "tensors of one shape")
        if inputs[0].qnn_params is None:
            return super().convert_pack(op)
        (out,) = self.get_output_tensors(op)
        for x in inputs:
            self._same_quantization("PACK", x, out)
        opts = PackOptions()
        table = op.BuiltinOptions()
        if table is not None:
            opts.Init(table.Bytes, table.Pos)
        out_shape = [int(d) for d in self.get_tensor_shape(out)]
        axis = (opts.Axis() if table is not None else 0) % len(out_shape)
        if len(out_shape) > 4:
            return self._packed_as_rows(inputs, out_shape, axis)
        one = tuple(out_shape[:axis] + [1] + out_shape[axis + 1:])
        parts = [self.bb.emit(relax.op.reshape(self.get_expr(x.tensor_idx), one))
                 for x in inputs]
        return relax.op.concat(parts, axis=axis)

    def _packed_as_rows(self, inputs, out_shape: list[int], axis: int):
        """A PACK into more than four axes: each input's codes read as (1, outer, 1, inner),
        the axes before and from the pack axis merged, concatenated along the third axis and
        read with the output's shape (reshapes and one 4-D CONCATENATION, what the NPU
        holds; a 5-D concatenation it would not)."""
        outer = int(np.prod(out_shape[:axis], dtype=np.int64))
        inner = int(np.prod(out_shape[axis + 1:], dtype=np.int64))
        parts = [self.bb.emit(relax.op.reshape(self.get_expr(x.tensor_idx),
                                               (1, outer, 1, inner))) for x in inputs]
        rows = self.bb.emit(relax.op.concat(parts, axis=2))
        return relax.op.reshape(rows, out_shape)

    def convert_unpack(self, op):
        """Where every dimension before the unpacked axis is 1: the input's codes read with
        the axis first (a reshape), then one unit-stride slice per output (SPLIT's form) of
        exactly the output's shape. Behind a dimension above 1: the axis merged with the next
        (:func:`_merged_unpack`), each output one slice of the merged axis; the last axis
        (whose outputs interleave) brought first by a ``permute_dims`` (:func:`_axis_first`,
        TRANSPOSE's copies on the NPU), then as above, or, where no permutation can bring it
        first, one channel sliced per output (:meth:`_unpacked_channels`)."""
        from tflite.UnpackOptions import UnpackOptions

        (x,) = self.get_input_tensors(op)
        if x.qnn_params is None:
            return super().convert_unpack(op)
        outs = self._split_outputs(op, "UNPACK", x)
        opts = UnpackOptions()
        table = op.BuiltinOptions()
        if table is not None:
            opts.Init(table.Bytes, table.Pos)
        shape = [int(d) for d in self.get_tensor_shape(x)]
        axis = (opts.Axis() if table is not None else 0) % len(shape)
        out_shape = shape[:axis] + shape[axis + 1:]
        if shape[axis] != len(outs) or not out_shape:
            raise _refuse(f"UNPACK of an axis of {shape[axis]} of {shape} into {len(outs)} "
                          "outputs")
        expr = self.get_expr(x.tensor_idx)
        if int(np.prod(shape[:axis], dtype=np.int64)) != 1 and axis + 1 < len(shape):
            merged, run = _merged_unpack(shape, axis)
            expr = self.bb.emit(relax.op.reshape(expr, merged))
            parts = [self.bb.emit(relax.op.strided_slice(expr, axes=[axis], begin=[i * run],
                                                         end=[(i + 1) * run]))
                     for i in range(len(outs))]
            return parts[0] if len(parts) == 1 else relax.Tuple(parts)
        if int(np.prod(shape[:axis], dtype=np.int64)) != 1:
            if (len(shape) == 4 and shape[0] != 1) or _is_reshape(self.bb, expr):
                return self._unpacked_channels(expr, shape, len(outs), out_shape)
            perm = _axis_first(len(shape), axis)
            expr = self.bb.emit(relax.op.permute_dims(expr, perm))
            shape = [shape[i] for i in perm]
        rows = out_shape[0]
        if shape[1:] != out_shape[1:] or shape[0] != len(outs) * rows:
            expr = self.bb.emit(relax.op.reshape(expr, (len(outs) * rows, *out_shape[1:])))
        parts = [self.bb.emit(relax.op.strided_slice(expr, axes=[0], begin=[i * rows],
                                                     end=[(i + 1) * rows]))
                 for i in range(len(outs))]
        return parts[0] if len(parts) == 1 else relax.Tuple(parts)

    def _unpacked_channels(self, expr, shape: list[int], n: int, out_shape: list[int]):
        """UNPACK of the last axis where a TRANSPOSE cannot bring it first (a 4-D input's
        batch above 1 stays where it is; a permutation of a reshape and the reshape after
        read as DEPTH_TO_SPACE): the input read as (rows, columns, channels), the axes before
        the last two folded into the rows (a reshape), one channel sliced per output (SPLIT's
        form: a box one channel deep) and read with the output's shape (a reshape)."""
        rows = int(np.prod(shape[:-2], dtype=np.int64))
        cols = shape[-2] if len(shape) > 1 else 1
        if [rows, cols, shape[-1]] != shape:
            expr = self.bb.emit(relax.op.reshape(expr, (rows, cols, shape[-1])))
        parts = [self.bb.emit(relax.op.reshape(
            self.bb.emit(relax.op.strided_slice(expr, axes=[2], begin=[i], end=[i + 1])),
            out_shape)) for i in range(n)]
        return parts[0] if len(parts) == 1 else relax.Tuple(parts)

    # ------------------------------------------------------------------ BATCH_MATMUL
    def convert_batch_matmul(self, op):
        """The QDQ region of an int8 BATCH_MATMUL: both operands dequantized per tensor, the
        one with its adj flag set read with its last two axes exchanged, one ``matmul``
        (batch dimensions broadcast as TFLite's kernel does), quantized to the output. A
        constant operand's codes become a Relax constant inside the region, as weights do
        (``get_tensor_expr``: a constant has no expression in the table to look up)."""
        from tflite.BatchMatMulOptions import BatchMatMulOptions

        a, b = self.get_input_tensors(op)[:2]
        if a.qnn_params is None:
            return super().convert_batch_matmul(op)
        (out,) = self.get_output_tensors(op)
        if b.qnn_params is None or out.qnn_params is None:
            raise _refuse("BATCH_MATMUL with a quantized and a float operand")
        if not (self.has_expr(a.tensor_idx) or self.has_expr(b.tensor_idx)):
            raise _refuse("BATCH_MATMUL of two constants; tvm-ethos multiplies a computed "
                          "operand (TFLite's converter folds a product of constants)")
        for t in (a, b, out):
            if np.asarray(t.qnn_params["scale"].value.numpy()).size != 1:
                raise _refuse("BATCH_MATMUL quantized per channel; TFLite's kernel takes one "
                              "scale and zero point per tensor")
        opts = BatchMatMulOptions()
        table = op.BuiltinOptions()
        adj = (False, False)
        if table is not None:
            opts.Init(table.Bytes, table.Pos)
            adj = (bool(opts.AdjX()), bool(opts.AdjY()))
        operands, shapes = [], []
        for t, flag in zip((a, b), adj):
            x = self.dequantize(self.get_tensor_expr(t), t)
            shape = [int(d) for d in self.get_tensor_shape(t)]
            rank = len(shape)
            if rank < 2:
                raise _refuse(f"BATCH_MATMUL of a {rank}-D operand; TFLite takes 2-D and above")
            if flag:
                x = relax.op.permute_dims(x, list(range(rank - 2)) + [rank - 1, rank - 2])
                shape = shape[:-2] + shape[:-3:-1]
            operands.append(x)
            shapes.append(shape)
        (sa, sb), flags = shapes, f"adj_x={adj[0]}, adj_y={adj[1]}"
        if sa[-1] != sb[-2]:
            raise _refuse(f"BATCH_MATMUL of {sa} by {sb} ({flags}, as multiplied): the first "
                          "operand's columns must equal the second's rows")
        try:
            np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]))
        except ValueError:
            raise _refuse(f"BATCH_MATMUL with batch dimensions {sa[:-2]} and {sb[:-2]}: each "
                          "pair must be equal or one of them 1") from None
        return self.quantize(relax.op.matmul(*operands), out)

    # ------------------------------------------------------------------ FULLY_CONNECTED
    def convert_fully_connected(self, op):
        """TFLite reads FULLY_CONNECTED's input as ``[elements / depth, depth]`` whatever its
        shape (``depth``: the weights' second dimension); TVM's converter multiplies the input
        as it is, which fails when its last dimension is not the depth (a 1x25x20x8 input
        against 4000-deep weights), and multiplies several rows of an input of more than two
        dimensions as they are (a 1x5x4x3 input), an operation no NPU Part is. Such an input
        is reshaped to its rows first (exact on codes), and with keep_num_dims the product
        reshaped back to the input's leading dimensions."""
        from tflite.FullyConnectedOptions import FullyConnectedOptions

        inputs = self.get_input_tensors(op)
        x, w = inputs[0], inputs[1]
        in_shape = [int(d) for d in self.get_tensor_shape(x)]
        depth = int(self.get_tensor_shape(w)[1])
        keep = False
        table = op.BuiltinOptions()
        if table is not None:
            opts = FullyConnectedOptions()
            opts.Init(table.Bytes, table.Pos)
            keep = bool(opts.KeepNumDims())
        elements = int(np.prod(in_shape, dtype=np.int64))
        rows = elements // depth if depth > 0 else 0
        # rows in more than the batch axis (a batch of 1x1 pixels is a 1x1 convolution)
        several = len(in_shape) > 2 and rows > 1 and \
            not (len(in_shape) == 4 and in_shape[1:3] == [1, 1])
        if not self.has_expr(x.tensor_idx) or (in_shape[-1:] == [depth] and not several) or \
                (keep and in_shape[-1:] != [depth]):
            # rows of the right depth as a Part takes them: TVM's matmul keeps the leading
            # dimensions, the same rows as TFLite's (a 4-D pooled input gives [1, 1, 1, units])
            return super().convert_fully_connected(op)
        if depth <= 0 or elements % depth:
            raise _refuse(f"FULLY_CONNECTED input of shape {in_shape} ({elements} elements) "
                          f"does not split into rows of the weights' depth {depth}")
        name = get_tensor_name(self.subgraph, x.tensor_idx)
        original = self.exp_tab.get_expr(name)
        self.exp_tab.set_expr(name, relax.op.reshape(original, (rows, depth)),
                              force_override=True)
        try:
            out = super().convert_fully_connected(op)
        finally:
            self.exp_tab.set_expr(name, original, force_override=True)
        if keep:
            # keep_num_dims: the rows back in the input's leading dimensions (in place of
            # TVM's reshape to the rows' own shape)
            if isinstance(out, relax.Call) and out.op == tvm.ir.Op.get("relax.reshape"):
                out = out.args[0]
            units = int(self.get_tensor_shape(w)[0])
            out = relax.op.reshape(out, in_shape[:-1] + [units])
        return out


def lstm_constants(lstm: Lstm) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The constants of an LSTM's Relax call: the four gates' input and recurrent weights as
    one (4, cells, features + cells) int8 array, their biases as one (4, cells) int32 array
    (``planner.parts.lstm``'s two constants), and its quantization's float64 vector."""
    weights = np.stack([np.concatenate([g.input_weights, g.recurrent_weights], axis=1)
                        for g in lstm.gates]).astype(np.int8)
    bias = np.stack([g.bias for g in lstm.gates]).astype(np.int32)
    quantization = LstmQuantization(
        tuple(lstm.input_q), tuple(lstm.hidden_q), float(lstm.cell_scale), lstm.cell_clip,
        lstm.time_major, tuple(float(g.input_scale) for g in lstm.gates),
        tuple(float(g.recurrent_scale) for g in lstm.gates))
    return weights, bias, quantization.to_params()
