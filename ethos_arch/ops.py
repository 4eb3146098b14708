"""The project's one operator vocabulary: :class:`Op`, and what each operator is (:class:`OpInfo`).

Every stage names operators by an ``Op`` member: the quantized operators the importers'
patterns read (``tvm_ethos.patterns.QOp.kind``), the planner's Parts (``planner.graph.Part``,
whose kinds are coarser: one ``POOL`` for both pools, one ``ELEMENTWISE`` for every binary
operator), the backends' checks and the stream, emulator and host tables. ``Op`` is a
``str`` enum whose values are the names written in JSON (planner reports, packages, the CLI),
so a member serializes as the plain string and compares equal to it; a string is turned into
an ``Op`` once, where it is read (:func:`parse_op`), with one error naming the known kinds.

``OpInfo`` follows Vela's ``OperatorInfo`` (``ethosu.vela.operation``): the NPU block type
that executes the operator, whether it reads weights, how many feature maps it reads, plus
what the project's tables ask: whether the Ethos-U applies it through a lookup table, whether
it only moves data, and the TFLite builtin it stands for. This module imports nothing of the
project (the planner, the stream model and the compiler all read it).
"""
from __future__ import annotations

import sys
from enum import Enum
from typing import NamedTuple

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10 (setup.py's floor) has no StrEnum
    class StrEnum(str, Enum):
        """A str whose str() and format() are its value, as 3.11's StrEnum."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


class BlockType(Enum):
    """The NPU block that executes an operator (Vela's ``NpuBlockType``); ``DEFAULT`` for an
    operator that is no single block operation (a sequence, a copy, a table)."""

    DEFAULT = "default"
    CONVOLUTION_MXN = "convolution_mxn"
    VECTOR_PRODUCT = "vector_product"
    POOLING = "pooling"
    CONVOLUTION_DEPTHWISE = "convolution_depthwise"
    ELEMENTWISE = "elementwise"
    REDUCE_SUM = "reduce_sum"
    DMA = "dma"


class Arity(Enum):
    """How many feature maps an operator reads (constants such as weights not counted)."""

    ONE = 1
    TWO = 2
    MANY = 3  # a variable number (CONCATENATION)


class OpInfo(NamedTuple):
    """What an operator is, independent of any backend.

    ``vela`` is the name of Vela's ``Op`` member for the same operator (None where Vela has
    none), so the two vocabularies can be checked against each other."""

    tflite_name: str | None
    block_type: BlockType = BlockType.DEFAULT
    arity: Arity = Arity.ONE
    has_weights: bool = False
    lut: bool = False
    data_move: bool = False
    vela: str | None = None

    @property
    def elementwise(self) -> bool:
        return self.block_type is BlockType.ELEMENTWISE

    @property
    def unary(self) -> bool:
        return self.arity is Arity.ONE

    @property
    def binary(self) -> bool:
        return self.arity is Arity.TWO


class Op(StrEnum):
    """Every operator kind the project names (values: the names written in JSON)."""

    # convolutions and matrix products
    CONV2D = "conv2d"
    DEPTHWISE_CONV2D = "depthwise_conv2d"
    TRANSPOSE_CONV2D = "transpose_conv2d"
    FULLY_CONNECTED = "fully_connected"
    BATCH_MATMUL = "batch_matmul"
    # pools and reductions
    AVG_POOL2D = "avg_pool2d"
    MAX_POOL2D = "max_pool2d"
    MEAN = "mean"
    REDUCE_MAX = "reduce_max"
    REDUCE_MIN = "reduce_min"
    REDUCE_SUM = "reduce_sum"
    ARG_MAX = "arg_max"
    # two-operand elementwise
    ADD = "add"
    MUL = "mul"
    SUB = "sub"
    MINIMUM = "minimum"
    MAXIMUM = "maximum"
    SQUARED_DIFFERENCE = "squared_difference"
    # one-operand elementwise and activations
    RELU = "relu"
    CLIP = "clip"
    ABS = "abs"
    REQUANTIZE = "requantize"
    SIGMOID = "sigmoid"
    TANH = "tanh"
    LEAKY_RELU = "leaky_relu"
    PRELU = "prelu"
    ELU = "elu"
    HARD_SWISH = "hard_swish"
    RSQRT = "rsqrt"
    EXP = "exp"
    GELU = "gelu"
    LOG = "log"
    NEG = "neg"
    SOFTMAX = "softmax"
    # recurrent
    LSTM = "lstm"
    SVDF = "svdf"
    # resampling
    RESIZE_BILINEAR = "resize_bilinear"
    RESIZE_NEAREST = "resize_nearest"
    # data movement
    RESHAPE = "reshape"
    CONCATENATE = "concatenate"
    PAD = "pad"
    MIRROR_PAD = "mirror_pad"
    REVERSE = "reverse"
    TILE = "tile"
    SPLIT = "split"
    TRANSPOSE = "transpose"
    DEPTH_TO_SPACE = "depth_to_space"
    # the planner's coarser Part kinds (planner.parts)
    POOL = "pool"
    ELEMENTWISE = "elementwise"
    UNARY = "unary"
    RESIZE = "resize"
    SLICE = "slice"
    #: an operator the planner knows only by its whole-input dependence
    OPAQUE = "opaque"

    @property
    def info(self) -> OpInfo:
        return _INFO[self]

    @property
    def tflite_name(self) -> str:
        """The TFLite builtin this operator stands for in reports (its name in capitals for
        the planner's kinds, which stand for several)."""
        return _INFO[self].tflite_name or self.value.upper()


_B, _A = BlockType, Arity

_INFO: dict[Op, OpInfo] = {
    Op.CONV2D: OpInfo("CONV_2D", _B.CONVOLUTION_MXN, has_weights=True, vela="Conv2DBias"),
    Op.DEPTHWISE_CONV2D: OpInfo("DEPTHWISE_CONV_2D", _B.CONVOLUTION_DEPTHWISE,
                                has_weights=True, vela="DepthwiseConv2DBias"),
    Op.TRANSPOSE_CONV2D: OpInfo("TRANSPOSE_CONV", _B.CONVOLUTION_MXN, has_weights=True,
                                vela="Conv2DBackpropInput"),
    Op.FULLY_CONNECTED: OpInfo("FULLY_CONNECTED", _B.VECTOR_PRODUCT, has_weights=True,
                               vela="FullyConnected"),
    Op.BATCH_MATMUL: OpInfo("BATCH_MATMUL", arity=_A.TWO, vela="BatchMatMul"),
    Op.AVG_POOL2D: OpInfo("AVERAGE_POOL_2D", _B.POOLING, vela="AvgPool"),
    Op.MAX_POOL2D: OpInfo("MAX_POOL_2D", _B.POOLING, vela="MaxPool"),
    Op.MEAN: OpInfo("MEAN", vela="Mean"),
    Op.REDUCE_MAX: OpInfo("REDUCE_MAX", vela="Max"),
    Op.REDUCE_MIN: OpInfo("REDUCE_MIN", vela="Min"),
    Op.REDUCE_SUM: OpInfo("SUM", vela="Sum"),
    Op.ARG_MAX: OpInfo("ARG_MAX", vela="ArgMax"),
    Op.ADD: OpInfo("ADD", _B.ELEMENTWISE, _A.TWO, vela="Add"),
    Op.MUL: OpInfo("MUL", _B.ELEMENTWISE, _A.TWO, vela="Mul"),
    Op.SUB: OpInfo("SUB", _B.ELEMENTWISE, _A.TWO, vela="Sub"),
    Op.MINIMUM: OpInfo("MINIMUM", _B.ELEMENTWISE, _A.TWO, vela="Minimum"),
    Op.MAXIMUM: OpInfo("MAXIMUM", _B.ELEMENTWISE, _A.TWO, vela="Maximum"),
    Op.SQUARED_DIFFERENCE: OpInfo("SQUARED_DIFFERENCE", _B.ELEMENTWISE, _A.TWO,
                                  vela="SquaredDifference"),
    Op.RELU: OpInfo("RELU", vela="Relu"),
    # RELU6 / RELU_N1_TO_1 read as a clamp; reports call it RELU, as TFLite's family
    Op.CLIP: OpInfo("RELU"),
    Op.ABS: OpInfo("ABS", _B.ELEMENTWISE, vela="Abs"),
    Op.REQUANTIZE: OpInfo("QUANTIZE", vela="Quantize"),
    Op.SIGMOID: OpInfo("LOGISTIC", lut=True, vela="Sigmoid"),
    Op.TANH: OpInfo("TANH", lut=True, vela="Tanh"),
    Op.LEAKY_RELU: OpInfo("LEAKY_RELU", _B.ELEMENTWISE, lut=True, vela="LeakyRelu"),
    Op.HARD_SWISH: OpInfo("HARD_SWISH", lut=True, vela="HardSwish"),
    Op.PRELU: OpInfo("PRELU", vela="Prelu"),
    Op.ELU: OpInfo("ELU", lut=True, vela="Elu"),
    Op.RSQRT: OpInfo("RSQRT", _B.ELEMENTWISE, lut=True, vela="Rsqrt"),
    Op.EXP: OpInfo("EXP", _B.ELEMENTWISE, lut=True, vela="Exp"),
    Op.GELU: OpInfo("GELU", lut=True, vela="Gelu"),
    Op.LOG: OpInfo("LOG", lut=True, vela="Log"),
    Op.NEG: OpInfo("NEG", lut=True, vela="Neg"),
    Op.SOFTMAX: OpInfo("SOFTMAX", vela="Softmax"),
    Op.LSTM: OpInfo("UNIDIRECTIONAL_SEQUENCE_LSTM", has_weights=True,
                    vela="UnidirectionalSequenceLstm"),
    # Vela's Svdf names no weights (it keeps the operator on the CPU)
    Op.SVDF: OpInfo("SVDF", vela="Svdf"),
    Op.RESIZE_BILINEAR: OpInfo("RESIZE_BILINEAR", _B.POOLING, vela="ResizeBilinear"),
    Op.RESIZE_NEAREST: OpInfo("RESIZE_NEAREST_NEIGHBOR", _B.POOLING, data_move=True,
                              vela="ResizeNearestNeighbor"),
    Op.RESHAPE: OpInfo("RESHAPE", data_move=True, vela="Reshape"),
    Op.CONCATENATE: OpInfo("CONCATENATION", arity=_A.MANY, data_move=True,
                           vela="ConcatTFLite"),
    Op.PAD: OpInfo("PAD", data_move=True, vela="Pad"),
    Op.MIRROR_PAD: OpInfo("MIRROR_PAD", data_move=True, vela="MirrorPad"),
    Op.REVERSE: OpInfo("REVERSE_V2", data_move=True, vela="ReverseV2"),
    Op.TILE: OpInfo("TILE", data_move=True, vela="Tile"),
    Op.SPLIT: OpInfo("SPLIT", data_move=True, vela="Split"),
    Op.TRANSPOSE: OpInfo("TRANSPOSE", data_move=True, vela="Transpose"),
    Op.DEPTH_TO_SPACE: OpInfo("DEPTH_TO_SPACE", data_move=True, vela="DepthToSpace"),
    Op.POOL: OpInfo(None, _B.POOLING),
    Op.ELEMENTWISE: OpInfo(None, _B.ELEMENTWISE, _A.TWO),
    Op.UNARY: OpInfo(None),
    Op.RESIZE: OpInfo(None, _B.POOLING),
    Op.SLICE: OpInfo("SLICE", data_move=True, vela="Slice"),
    Op.OPAQUE: OpInfo(None),
}

#: the planner Part kinds (``planner.parts``' constructors and the part matchers make only
#: these)
PART_OPS: frozenset[Op] = frozenset({
    Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED, Op.POOL, Op.MEAN, Op.ELEMENTWISE,
    Op.UNARY, Op.CONCATENATE, Op.RESHAPE, Op.TRANSPOSE, Op.RESIZE, Op.PAD, Op.SLICE,
    Op.SOFTMAX, Op.DEPTH_TO_SPACE, Op.LSTM, Op.SVDF, Op.BATCH_MATMUL, Op.ARG_MAX, Op.OPAQUE})


class UnknownOpError(ValueError):
    """A kind name that is no :class:`Op`."""


def parse_op(name: str, where: str = "operator kind") -> Op:
    """The ``Op`` called ``name`` (its JSON value, e.g. ``"conv2d"``), else one error naming
    ``where`` it was read and the known kinds."""
    try:
        return Op(name)
    except ValueError:
        known = ", ".join(op.value for op in Op)
        raise UnknownOpError(f"{where}: unknown operator kind {name!r}; use one of: "
                             f"{known}") from None
