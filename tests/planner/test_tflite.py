"""planner.tflite: the shipped models convert exactly, every mapped operator builds the right
Part, and damaged or unsupported files fail with one-line PlannerErrors.

Models the shipped set does not cover are written here with the flatbuffer builder
(:class:`ModelSpec`), so each operator mapping is checked against a declared output shape.
"""
from __future__ import annotations

import collections
import math
import random
import re
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
import tflite as T
from tflite.BuiltinOperator import BuiltinOperator as BO
from tflite.BuiltinOptions import BuiltinOptions as BOPT
from tflite.TensorType import TensorType as TT

from planner.errors import PlannerError
from planner.graph import PlannerGraph
from planner.tflite import (
    SUPPORTED_OPERATORS,
    _TInfo,
    _unique_names,
    graph_from_tflite_model,
    load_tflite,
)
from tests.helpers.models import MODELS_DIR as MODELS

# TFLite operator counts from the shipped models' README.md.
README_OPS = {
    "mobilenet_v1_1.0_224": {"CONV_2D": 15, "DEPTHWISE_CONV_2D": 13, "MEAN": 1, "RESHAPE": 1,
                             "SOFTMAX": 1},
    "mobilenet_v1_0.25_96": {"CONV_2D": 15, "DEPTHWISE_CONV_2D": 13, "MEAN": 1, "RESHAPE": 1,
                             "SOFTMAX": 1},
    "ds_cnn_kws": {"CONV_2D": 5, "DEPTHWISE_CONV_2D": 4, "AVERAGE_POOL_2D": 1,
                   "FULLY_CONNECTED": 1, "SOFTMAX": 1},
    "resnet8_cifar": {"CONV_2D": 9, "ADD": 3, "AVERAGE_POOL_2D": 1, "FULLY_CONNECTED": 1,
                      "SOFTMAX": 1},
}
# The Parts they must become: FULLY_CONNECTED on a 4-D input gets an explicit reshape Part.
EXPECTED_PARTS = {
    "mobilenet_v1_1.0_224": {"conv2d": 15, "depthwise_conv2d": 13, "mean": 1, "reshape": 1,
                             "softmax": 1},
    "mobilenet_v1_0.25_96": {"conv2d": 15, "depthwise_conv2d": 13, "mean": 1, "reshape": 1,
                             "softmax": 1},
    "ds_cnn_kws": {"conv2d": 5, "depthwise_conv2d": 4, "pool": 1, "reshape": 1,
                   "fully_connected": 1, "softmax": 1},
    "resnet8_cifar": {"conv2d": 9, "elementwise": 3, "pool": 1, "reshape": 1,
                      "fully_connected": 1, "softmax": 1},
}
# README "naive peak (largest layer in+out, int8)".
README_PEAK = {"mobilenet_v1_1.0_224": 1_204_224, "mobilenet_v1_0.25_96": 55_296,
               "ds_cnn_kws": 16_000, "resnet8_cifar": 49_152}
README_INPUT = {"mobilenet_v1_1.0_224": (1, 224, 224, 3), "mobilenet_v1_0.25_96": (1, 96, 96, 3),
                "ds_cnn_kws": (1, 49, 10, 1), "resnet8_cifar": (1, 32, 32, 3)}
OP_NAMES = {v: k for k, v in vars(BO).items() if not k.startswith("_")}


def model_path(stem: str) -> Path:
    p = MODELS / f"{stem}.tflite"
    if not p.exists():
        pytest.skip(f"{p} is not available")
    return p


@pytest.fixture(scope="module")
def graphs() -> dict[str, PlannerGraph]:
    return {stem: load_tflite(model_path(stem)) for stem in README_OPS}


def file_ops(path: Path) -> tuple[collections.Counter, list]:
    """Operator histogram and the subgraph, read with the tflite package alone."""
    m = T.Model.GetRootAs(path.read_bytes(), 0)
    sg = m.Subgraphs(0)
    ops = collections.Counter()
    for i in range(sg.OperatorsLength()):
        oc = m.OperatorCodes(sg.Operators(i).OpcodeIndex())
        ops[OP_NAMES[max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())]] += 1
    return ops, sg


# ------------------------------------------------------------------------------------------
# the shipped models
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", sorted(README_OPS))
def test_shipped_model_converts_with_readme_op_counts(stem, graphs):
    ops, sg = file_ops(model_path(stem))
    assert dict(ops) == README_OPS[stem]
    g = graphs[stem]
    assert dict(collections.Counter(p.kind for p in g.parts)) == EXPECTED_PARTS[stem]
    assert [t.shape for t in g.inputs] == [README_INPUT[stem]]
    # Tensor names are the model's: graph I/O and every activation tensor.
    names = {sg.Tensors(i).Name().decode() for i in range(sg.TensorsLength())}
    made = {t.name for t in g.tensors if not t.is_constant} - names
    assert made == ({f"{p.name}:0" for p in g.parts if p.name.endswith("/reshape")})
    assert len(made) == EXPECTED_PARTS[stem].get("fully_connected", 0)
    assert g.inputs[0].name == "serving_default_input:0"
    assert g.outputs[0].name == "StatefulPartitionedCall_1:0"
    assert all(t.dtype == "int8" for t in g.tensors if not t.is_constant)


@pytest.mark.parametrize("stem", sorted(README_PEAK))
def test_naive_peak_matches_readme(stem, graphs):
    g = graphs[stem]
    peak = max(p.output.bytes + sum(t.bytes for t in p.inputs if not t.is_constant)
               for p in g.parts)
    assert peak == README_PEAK[stem]


def test_mobilenet_224_known_layers(graphs):
    g = graphs["mobilenet_v1_1.0_224"]
    by = {p.name: p for p in g.parts}
    first = by["conv_2d_0"]
    assert first.output.shape == (1, 112, 112, 32)
    assert first.attr("strides") == (2, 2)
    assert first.attr("padding") == (0, 0, 1, 1)  # TFLite SAME puts the odd pad at the end
    assert first.attr("activation") == "relu6"
    assert first.inputs[1].name == "conv_2d_0:weights"
    assert first.inputs[1].shape == (32, 3, 3, 3)
    # A full-width row stripe reads 3 input rows and the padded width 2*112+1.
    assert first.propagators[0].apply_shape((1, 1, 112, 32)) == (1, 3, 225, 3)
    assert first.propagators[0].offset == (0, 0, 0, 0)
    assert by["depthwise_conv_2d_1"].output.shape == (1, 112, 112, 32)
    assert by["depthwise_conv_2d_1"].inputs[1].shape == (1, 3, 3, 32)
    assert by["conv_2d_2"].output.shape == (1, 112, 112, 64)
    assert by["depthwise_conv_2d_3"].output.shape == (1, 56, 56, 64)
    assert by["depthwise_conv_2d_3"].attr("strides") == (2, 2)
    assert by["conv_2d_26"].output.shape == (1, 7, 7, 1024)
    assert by["mean_27"].output.shape == (1, 1, 1, 1024)
    assert by["conv_2d_28"].output.shape == (1, 1, 1, 1000)
    assert by["conv_2d_28"].attr("activation") is None
    assert by["softmax_30"].kind == "softmax" and by["softmax_30"].output.shape == (1, 1000)
    assert [p.name for p in g.topological_parts()][:3] == ["conv_2d_0", "depthwise_conv_2d_1",
                                                          "conv_2d_2"]


@pytest.mark.parametrize("stem", sorted(README_OPS))
def test_weights_match_the_file(stem, graphs):
    """Every weight constant has the shape of the model's weight tensor, bias present iff the
    model has one."""
    path = model_path(stem)
    m = T.Model.GetRootAs(path.read_bytes(), 0)
    sg = m.Subgraphs(0)
    expect = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        oc = m.OperatorCodes(op.OpcodeIndex())
        name = OP_NAMES[max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())]
        if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            ins = op.InputsAsNumpy()
            w = tuple(int(d) for d in sg.Tensors(ins[1]).ShapeAsNumpy())
            expect.append((f"{name.lower()}_{i}", w, len(ins) > 2 and ins[2] >= 0))
    by = {p.name: p for p in graphs[stem].parts}
    got = [(n, by[n].inputs[1].shape, any(t.name == f"{n}:bias" for t in by[n].inputs))
           for n, _, _ in expect]
    assert got == expect


def test_fully_connected_gets_explicit_reshape(graphs):
    g = graphs["ds_cnn_kws"]
    fc = next(p for p in g.parts if p.kind == "fully_connected")
    rs = g.producer(fc.inputs[0])
    assert rs.kind == "reshape" and rs.name == f"{fc.name}/reshape"
    assert rs.inputs[0].shape == (1, 1, 1, 64) and rs.output.shape == (1, 64)
    assert fc.output.shape == (1, 12)
    assert not any(t.name.endswith(":bias") for t in fc.inputs)  # the model has no FC bias


def test_weight_compression_option():
    g = load_tflite(model_path("resnet8_cifar"), weight_compression=0.5)
    ratios = {t.name.rsplit(":", 1)[-1] if t.is_constant else "act": t.compression_ratio
              for t in g.tensors}
    assert ratios == {"weights": 0.5, "bias": 1.0, "act": 1.0}
    w = g.tensor("conv_2d_0:weights")
    assert w.bytes == math.ceil(w.elements * 0.5)
    for bad in (0, 1.5, -1, "x"):
        with pytest.raises(PlannerError, match="weight_compression"):
            load_tflite(model_path("resnet8_cifar"), weight_compression=bad)


def test_deterministic_and_sources_agree():
    p = model_path("mobilenet_v1_0.25_96")
    a = load_tflite(p)
    b = load_tflite(str(p))
    c = load_tflite(p.read_bytes(), name="mobilenet_v1_0.25_96")
    d = graph_from_tflite_model(T.Model.GetRootAs(p.read_bytes(), 0), name="mobilenet_v1_0.25_96")
    assert a == b == c == d
    assert a.name == "mobilenet_v1_0.25_96"
    assert [p.name for p in a.parts] == [p.name for p in c.parts]


# ------------------------------------------------------------------------------------------
# damaged files
# ------------------------------------------------------------------------------------------
def one_line_error(data, match: str) -> str:
    with pytest.raises(PlannerError, match=match) as e:
        load_tflite(data)
    msg = str(e.value)
    assert "\n" not in msg and msg
    return msg


def test_empty_short_and_random_bytes():
    one_line_error(b"", "empty")
    one_line_error(b"TFL3", "not a TFLite flatbuffer")
    rng = random.Random(1)
    for n in (8, 64, 5000):
        one_line_error(bytes(rng.randrange(256) for _ in range(n)), "not a TFLite flatbuffer")
    one_line_error(model_path("resnet8_cifar").read_bytes()[:4] + b"XXXX", "identifier")


def test_random_bytes_with_identifier_fail_cleanly():
    rng = random.Random(2)
    for _ in range(50):
        junk = bytearray(rng.randrange(256) for _ in range(rng.randrange(8, 400)))
        junk[4:8] = b"TFL3"
        with pytest.raises(PlannerError) as e:
            load_tflite(bytes(junk))
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("stem", ["ds_cnn_kws", "resnet8_cifar"])
def test_truncated_files(stem):
    data = model_path(stem).read_bytes()
    for cut in [9, 100, len(data) // 3, len(data) // 2, len(data) - 100, len(data) - 1]:
        one_line_error(data[:cut], "truncated or corrupt")


def test_missing_file(tmp_path):
    with pytest.raises(PlannerError, match="cannot read TFLite file"):
        load_tflite(tmp_path / "nope.tflite")


def test_path_prefixes_message(tmp_path):
    p = tmp_path / "bad.tflite"
    p.write_bytes(b"\0" * 16)
    with pytest.raises(PlannerError, match=f"^{re.escape(str(p))}: not a TFLite flatbuffer"):
        load_tflite(p)


# ------------------------------------------------------------------------------------------
# hand-built models
# ------------------------------------------------------------------------------------------
class ModelSpec:
    """A minimal TFLite writer: enough schema to exercise the loader's operator mappings."""

    def __init__(self) -> None:
        self.tensors: list[dict] = []
        self.ops: list[dict] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(self, name: str, shape, type=TT.INT8, data: bytes | None = None,
               signature=None, quant: tuple[float, int] | None = (1.0, 0)) -> int:
        """``quant`` is (scale, zero point): the planner ignores it, the TFLite runtime
        needs it to prepare integer kernels."""
        self.tensors.append(dict(name=name, shape=list(shape), type=type, data=data,
                                 signature=signature,
                                 quant=quant if type in (TT.INT8, TT.INT16, TT.INT32) else None))
        return len(self.tensors) - 1

    def input(self, name: str, shape, type=TT.INT8, **kw) -> int:
        i = self.tensor(name, shape, type, **kw)
        self.inputs.append(i)
        return i

    def const(self, name: str, values, dtype=np.int32, shape=None) -> int:
        a = np.asarray(values, dtype=dtype)
        ttype = {np.int32: TT.INT32, np.int8: TT.INT8, np.int64: TT.INT64}[dtype]
        return self.tensor(name, a.shape if shape is None else shape, ttype,
                           a.tobytes() or b"\0")

    def weights(self, name: str, shape) -> int:
        return self.const(name, np.ones(shape), np.int8)

    def op(self, code: int, inputs, outputs, options: tuple[str, dict] | None = None,
           custom: str | None = None) -> list[int]:
        self.ops.append(dict(code=code, inputs=list(inputs), outputs=list(outputs),
                             options=options, custom=custom))
        return list(outputs)

    def build(self, subgraphs: bool = True, version: int = 3) -> bytes:
        b = flatbuffers.Builder(1024)

        def ivec(start, xs):
            start(b, len(xs))
            for x in reversed(xs):
                b.PrependInt32(x)
            return b.EndVector()

        def ovec(start, xs):
            start(b, len(xs))
            for x in reversed(xs):
                b.PrependUOffsetTRelative(x)
            return b.EndVector()

        buffers, tbuf = [], []
        T.BufferStart(b)
        buffers.append(T.BufferEnd(b))
        for t in self.tensors:
            if t["data"] is None:
                tbuf.append(0)
                continue
            data = b.CreateByteVector(t["data"])
            T.BufferStart(b)
            T.BufferAddData(b, data)
            buffers.append(T.BufferEnd(b))
            tbuf.append(len(buffers) - 1)
        tensors = []
        for t, bi in zip(self.tensors, tbuf):
            name = b.CreateString(t["name"])
            shape = ivec(T.TensorStartShapeVector, t["shape"])
            sig = ivec(T.TensorStartShapeSignatureVector, t["signature"]) \
                if t["signature"] is not None else None
            quant = None
            if t["quant"] is not None:
                T.QuantizationParametersStartScaleVector(b, 1)
                b.PrependFloat32(t["quant"][0])
                scale = b.EndVector()
                T.QuantizationParametersStartZeroPointVector(b, 1)
                b.PrependInt64(t["quant"][1])
                zp = b.EndVector()
                T.QuantizationParametersStart(b)
                T.QuantizationParametersAddScale(b, scale)
                T.QuantizationParametersAddZeroPoint(b, zp)
                quant = T.QuantizationParametersEnd(b)
            T.TensorStart(b)
            T.TensorAddShape(b, shape)
            T.TensorAddType(b, t["type"])
            T.TensorAddBuffer(b, bi)
            T.TensorAddName(b, name)
            if sig is not None:
                T.TensorAddShapeSignature(b, sig)
            if quant is not None:
                T.TensorAddQuantization(b, quant)
            tensors.append(T.TensorEnd(b))
        codes = sorted({(o["code"], o["custom"] or "") for o in self.ops})
        code_offsets = []
        for code, custom in codes:
            cname = b.CreateString(custom) if custom else None
            T.OperatorCodeStart(b)
            T.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
            T.OperatorCodeAddBuiltinCode(b, code)
            T.OperatorCodeAddVersion(b, 1)
            if cname is not None:
                T.OperatorCodeAddCustomCode(b, cname)
            code_offsets.append(T.OperatorCodeEnd(b))
        ops = []
        for o in self.ops:
            opts = None
            if o["options"] is not None:
                cls, fields = o["options"]
                getattr(T, f"{cls}Start")(b)
                for k, v in fields.items():
                    getattr(T, f"{cls}Add{k}")(b, v)
                opts = getattr(T, f"{cls}End")(b)
            ins = ivec(T.OperatorStartInputsVector, o["inputs"])
            outs = ivec(T.OperatorStartOutputsVector, o["outputs"])
            T.OperatorStart(b)
            T.OperatorAddOpcodeIndex(b, codes.index((o["code"], o["custom"] or "")))
            T.OperatorAddInputs(b, ins)
            T.OperatorAddOutputs(b, outs)
            if opts is not None:
                T.OperatorAddBuiltinOptionsType(b, getattr(BOPT, o["options"][0]))
                T.OperatorAddBuiltinOptions(b, opts)
            ops.append(T.OperatorEnd(b))
        sgs = []
        if subgraphs:
            tv = ovec(T.SubGraphStartTensorsVector, tensors)
            iv = ivec(T.SubGraphStartInputsVector, self.inputs)
            outv = ivec(T.SubGraphStartOutputsVector, self.outputs)
            opv = ovec(T.SubGraphStartOperatorsVector, ops)
            sname = b.CreateString("main")
            T.SubGraphStart(b)
            T.SubGraphAddTensors(b, tv)
            T.SubGraphAddInputs(b, iv)
            T.SubGraphAddOutputs(b, outv)
            T.SubGraphAddOperators(b, opv)
            T.SubGraphAddName(b, sname)
            sgs.append(T.SubGraphEnd(b))
        cv = ovec(T.ModelStartOperatorCodesVector, code_offsets)
        sv = ovec(T.ModelStartSubgraphsVector, sgs)
        bv = ovec(T.ModelStartBuffersVector, buffers)
        desc = b.CreateString("built by test_tflite")
        T.ModelStart(b)
        T.ModelAddVersion(b, version)
        T.ModelAddOperatorCodes(b, cv)
        T.ModelAddSubgraphs(b, sv)
        T.ModelAddBuffers(b, bv)
        T.ModelAddDescription(b, desc)
        b.Finish(T.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def conv_options(padding=0, stride=1, act=0):
    return ("Conv2DOptions", {"Padding": padding, "StrideH": stride, "StrideW": stride,
                              "FusedActivationFunction": act, "DilationHFactor": 1,
                              "DilationWFactor": 1})


def every_op_model() -> ModelSpec:
    """One model using every mapped operator; output shapes declared by hand."""
    m = ModelSpec()
    x = m.input("x", (1, 8, 8, 4))
    t = m.tensor
    c0 = t("c0", (1, 4, 4, 8))
    m.op(BO.CONV_2D, [x, m.weights("w0", (8, 3, 3, 4)), m.const("b0", np.zeros(8))], [c0],
         conv_options(padding=0, stride=2, act=1))
    d1 = t("d1", (1, 4, 4, 16))
    m.op(BO.DEPTHWISE_CONV_2D, [c0, m.weights("w1", (1, 3, 3, 16)), m.const("b1", np.zeros(16))],
         [d1],
         ("DepthwiseConv2DOptions", {"Padding": 0, "StrideH": 1, "StrideW": 1,
                                     "DepthMultiplier": 2, "FusedActivationFunction": 3,
                                     "DilationHFactor": 1, "DilationWFactor": 1}))
    p2 = t("p2", (1, 2, 2, 16))
    m.op(BO.MAX_POOL_2D, [d1], [p2], ("Pool2DOptions", {"Padding": 1, "StrideH": 2,
                                                        "StrideW": 2, "FilterHeight": 2,
                                                        "FilterWidth": 2}))
    pad3 = t("pad3", (1, 4, 4, 16))
    m.op(BO.PAD, [p2, m.const("pads", [[0, 0], [1, 1], [1, 1], [0, 0]])], [pad3])
    r4 = t("r4", (1, 8, 8, 16))
    m.op(BO.RESIZE_NEAREST_NEIGHBOR, [pad3, m.const("sz", [8, 8])], [r4],
         ("ResizeNearestNeighborOptions", {"AlignCorners": 0, "HalfPixelCenters": 0}))
    r5 = t("r5", (1, 8, 8, 16))
    m.op(BO.RESIZE_BILINEAR, [pad3, m.const("sz2", [8, 8])], [r5],
         ("ResizeBilinearOptions", {"AlignCorners": 0, "HalfPixelCenters": 1}))
    a6 = t("a6", (1, 8, 8, 16))
    m.op(BO.ADD, [r4, r5], [a6], ("AddOptions", {"FusedActivationFunction": 3}))
    m7 = t("m7", (1, 8, 8, 16))
    m.op(BO.MUL, [a6, m.const("scale", np.ones(16), np.int8)], [m7])
    cat8 = t("cat8", (1, 8, 8, 32))
    m.op(BO.CONCATENATION, [m7, r5], [cat8], ("ConcatenationOptions", {"Axis": -1}))
    s9a, s9b = t("s9a", (1, 8, 8, 16)), t("s9b", (1, 8, 8, 16))
    m.op(BO.SPLIT, [m.const("ax", [3], shape=[]), cat8], [s9a, s9b],
         ("SplitOptions", {"NumSplits": 2}))
    v10a, v10b = t("v10a", (1, 8, 8, 4)), t("v10b", (1, 8, 8, 12))
    m.op(BO.SPLIT_V, [s9a, m.const("sizes", [4, -1]), m.const("ax2", [3], shape=[])],
         [v10a, v10b], ("SplitVOptions", {"NumSplits": 2}))
    sl11 = t("sl11", (1, 4, 7, 8))
    m.op(BO.SLICE, [v10b, m.const("beg", [0, 1, 1, 0]), m.const("size", [1, 4, -1, 8])], [sl11])
    ss12 = t("ss12", (8, 8, 2))
    m.op(BO.STRIDED_SLICE, [v10b, m.const("b12", [0, 0, 0, -3]), m.const("e12", [1, 8, 8, -1]),
                            m.const("st12", [1, 1, 1, 1])], [ss12],
         ("StridedSliceOptions", {"BeginMask": 0, "EndMask": 0b0110, "ShrinkAxisMask": 1}))
    mx13 = t("mx13", (1, 8, 8, 16))
    m.op(BO.MAXIMUM, [s9b, s9b], [mx13])
    mn14 = t("mn14", (1, 8, 8, 16))
    m.op(BO.MINIMUM, [mx13, m.const("lim", [5], np.int8, shape=[])], [mn14])
    sb15 = t("sb15", (1, 8, 8, 16))
    m.op(BO.SUB, [mn14, s9b], [sb15], ("SubOptions", {"FusedActivationFunction": 1}))
    prev = v10a
    fixed = {BO.LOGISTIC: (1 / 256, -128), BO.TANH: (1 / 128, 0)}  # the runtime insists
    for k, code in enumerate([BO.LOGISTIC, BO.TANH, BO.RELU, BO.RELU6, BO.LEAKY_RELU,
                              BO.HARD_SWISH]):
        nxt = t(f"u{k}", (1, 8, 8, 4), quant=fixed.get(code, (1.0, 0)))
        opts = ("LeakyReluOptions", {"Alpha": 0.25}) if code == BO.LEAKY_RELU else None
        m.op(code, [prev], [nxt], opts)
        prev = nxt
    q = t("q", (1, 8, 8, 4), TT.INT16)
    m.op(BO.QUANTIZE, [prev], [q])
    d2s = t("d2s", (1, 16, 16, 1))
    m.op(BO.DEPTH_TO_SPACE, [v10a], [d2s], ("DepthToSpaceOptions", {"BlockSize": 2}))
    tr = t("tr", (1, 1, 16, 16))
    m.op(BO.TRANSPOSE, [d2s, m.const("perm", [0, 3, 2, 1])], [tr])
    ap = t("ap", (1, 1, 8, 16))
    m.op(BO.AVERAGE_POOL_2D, [tr], [ap], ("Pool2DOptions", {"Padding": 0, "StrideH": 2,
                                                           "StrideW": 2, "FilterHeight": 3,
                                                           "FilterWidth": 3}))
    mean = t("mean", (1, 16))
    m.op(BO.MEAN, [ap, m.const("axes", [1, 2])], [mean], ("ReducerOptions", {"KeepDims": 0}))
    rs = t("rs", (1, 4, 4))
    m.op(BO.RESHAPE, [mean, m.const("shape", [1, 4, 4])], [rs])
    sq = t("sq", (4, 4))
    m.op(BO.SQUEEZE, [rs], [sq])
    fc = t("fc", (1, 10))
    m.op(BO.FULLY_CONNECTED, [sb15, m.weights("fcw", (10, 1024)), m.const("fcb", np.zeros(10))],
         [fc], ("FullyConnectedOptions", {"FusedActivationFunction": 1}))
    sm = t("sm", (1, 10), quant=(1 / 256, -128))
    m.op(BO.SOFTMAX, [fc], [sm], ("SoftmaxOptions", {"Beta": 0.5}))
    ed = t("ed", (4, 1, 4))
    m.op(BO.EXPAND_DIMS, [sq, m.const("ed_axis", [1])], [ed])
    m.outputs = [sm, ed, ss12, sl11, q, v10b]
    return m


def test_every_mapped_operator():
    m = every_op_model()
    g = load_tflite(m.build())
    assert g.name == "main"
    by = {p.name: p for p in g.parts}
    built = {OP_NAMES[o["code"]] for o in m.ops}
    # RSQRT, EXP, GELU, LOG, NEG, RELU_0_TO_1: tests/tvm_ethos/test_rsqrt.py,
    # test_tflite_exp_gelu_log.py (EXP, GELU, LOG, NEG) and test_tflite_relu_0_to_1.py;
    # UNIDIRECTIONAL_SEQUENCE_LSTM: tests/planner/test_lstm_part.py;
    # SVDF: tests/planner/test_svdf_part.py;
    # SQUARED_DIFFERENCE: tests/tvm_ethos/test_tflite_squared_difference.py;
    # BATCH_MATMUL: tests/planner/test_batch_matmul_part.py;
    # ARG_MAX: tests/tvm_ethos/test_tflite_arg_max.py;
    # SUM, REDUCE_MAX, REDUCE_MIN (over the depth): tests/tvm_ethos/test_tflite_reduce_depth.py
    assert built == (set(SUPPORTED_OPERATORS) - {"PADV2", "RELU_N1_TO_1", "RSQRT", "EXP",
                                                 "GELU", "LOG", "NEG", "RELU_0_TO_1",
                                                 "UNIDIRECTIONAL_SEQUENCE_LSTM", "SVDF",
                                                 "SQUARED_DIFFERENCE", "BATCH_MATMUL",
                                                 "ARG_MAX", "SUM", "REDUCE_MAX", "REDUCE_MIN"})
    kinds = collections.Counter(p.kind for p in g.parts)
    assert kinds == {"conv2d": 1, "depthwise_conv2d": 1, "pool": 2, "pad": 1, "resize": 2,
                     "elementwise": 5, "concatenate": 1, "slice": 6, "reshape": 5,
                     "unary": 7, "depth_to_space": 1, "transpose": 1, "mean": 1,
                     "fully_connected": 1, "softmax": 1}
    c = by["conv_2d_0"]
    assert c.attr("padding") == (0, 0, 1, 1) and c.attr("activation") == "relu"
    assert [t.name for t in c.inputs] == ["x", "conv_2d_0:weights", "conv_2d_0:bias"]
    dw = by["depthwise_conv_2d_1"]
    assert dw.attr("depth_multiplier") == 2 and dw.attr("activation") == "relu6"
    assert [t.shape for t in dw.inputs] == [(1, 4, 4, 8), (1, 3, 3, 16), (16,)]
    assert by["max_pool_2d_2"].attr("pool_type") == "max"
    assert by["pad_3"].attr("pads") == ((0, 0), (1, 1), (1, 1), (0, 0))
    assert by["resize_nearest_neighbor_4"].attr("scale") == (2, 2)
    assert by["resize_bilinear_5"].attr("method") == "bilinear"
    assert by["add_6"].attr("activation") == "relu6"
    mul = by["mul_7"]
    assert mul.inputs[1].is_constant and mul.inputs[1].name == "mul_7:const1"
    assert by["concatenation_8"].attr("axis") == 3
    assert by["split_9/1"].attr("begin") == (0, 0, 0, 16)
    assert by["split_v_10/1"].attr("begin") == (0, 0, 0, 4)
    assert by["slice_11"].output.shape == (1, 4, 7, 8)
    # STRIDED_SLICE: begin -3 on the last axis, end masked on H and W, axis 0 shrunk.
    assert by["strided_slice_12"].attr("begin") == (0, 0, 0, 9)
    assert by["strided_slice_12"].output.shape == (1, 8, 8, 2)
    assert by["strided_slice_12/reshape"].output.name == "ss12"
    assert by["minimum_14"].inputs[1].shape == (1,)  # a scalar constant broadcasts
    assert by["sub_15"].attr("op") == "sub"
    assert [by[f"{n}_{16 + k}"].attr("op") for k, n in enumerate(
        ["logistic", "tanh", "relu", "relu6", "leaky_relu", "hard_swish"])] == \
        ["sigmoid", "tanh", "relu", "relu6", "leaky_relu", "hard_swish"]
    assert by["leaky_relu_20"].attr("alpha") == 0.25
    assert g.tensor("q").dtype == "int16" and by["quantize_22"].attr("op") == "quantize"
    assert by["depth_to_space_23"].attr("block_size") == 2
    assert by["transpose_24"].attr("perm") == (0, 3, 2, 1)
    assert by["average_pool_2d_25"].attr("padding") == (1, 0, 1, 1)
    assert by["mean_26"].attr("keepdims") is False
    assert by["squeeze_28"].kind == "reshape"
    assert by["fully_connected_29/reshape"].output.shape == (1, 1024)
    assert by["fully_connected_29"].attr("activation") == "relu"
    assert by["softmax_30"].attr("beta") == 0.5
    assert by["expand_dims_31"].kind == "reshape"
    assert [t.name for t in g.outputs] == ["sm", "ed", "ss12", "sl11", "q", "v10b"]


def test_every_op_model_agrees_with_the_tflite_runtime():
    """The hand-declared shapes above are what TFLite itself computes (so the loader's
    shape check compares against the truth, not against this file's arithmetic)."""
    interpreter = pytest.importorskip("ai_edge_litert.interpreter")
    m = every_op_model()
    it = interpreter.Interpreter(model_content=m.build())
    it.allocate_tensors()
    runtime = {d["name"]: tuple(int(x) for x in d["shape"]) for d in it.get_tensor_details()}
    declared = {t["name"]: tuple(t["shape"]) for t in m.tensors}
    assert runtime == declared
    g = load_tflite(m.build())
    acts = {t.name: t.shape for t in g.tensors if not t.is_constant}
    assert {n: s for n, s in acts.items() if n in declared} == \
        {n: s for n, s in runtime.items() if n in acts}
    assert set(acts) - set(declared) == {"fully_connected_29/reshape:0", "strided_slice_12:0"}


def test_resize_bilinear_without_half_pixel_reads_the_next_row():
    m = ModelSpec()
    x = m.input("x", (1, 4, 4, 2))
    y = m.tensor("y", (1, 16, 16, 2))
    m.op(BO.RESIZE_BILINEAR, [x, m.const("sz", [16, 16])], [y],
         ("ResizeBilinearOptions", {"AlignCorners": 0, "HalfPixelCenters": 0}))
    m.outputs = [y]
    p = load_tflite(m.build()).parts[0]
    # Output rows 1..4 read floor(r/4) and floor(r/4)+1 for r in 1..4: input rows [0, 3).
    prop = p.propagators[0]
    lo = math.floor(prop.apply_offset((0, 1, 0, 0))[1])
    hi = lo + math.ceil(prop.apply_shape((1, 4, 16, 2))[1])
    assert lo <= 0 and hi >= 3


def test_duplicate_tensor_names_refused_as_compile_refuses_them():
    m = ModelSpec()
    x = m.input("t", (1, 4, 4, 2))
    y = m.tensor("t", (1, 4, 4, 2))
    m.op(BO.RELU, [x], [y])
    m.outputs = [y]
    one_line_error(m.build(), r"^<bytes>: tensors 0 and 1 are both named 't'")


def test_repeated_names_made_unique():
    # the front door refuses repeated names, so the reader's renaming is driven directly
    infos = [_TInfo(i, raw, (1,), 9, 0, False, False)
             for i, raw in enumerate(["t", "t", "t", "t_1", "", "tensor_4"])]
    _unique_names(infos)
    assert [i.name for i in infos] == ["t", "t_2", "t_3", "t_1", "tensor_4_1", "tensor_4"]


def unary_model(code=BO.RELU, in_type=TT.INT8, out_type=TT.INT8, shape=(1, 4, 4, 2),
                signature=None, opts=None, custom=None) -> bytes:
    m = ModelSpec()
    x = m.input("x", shape, in_type, signature=signature)
    y = m.tensor("y", shape, out_type)
    m.op(code, [x], [y], opts, custom)
    m.outputs = [y]
    return m.build()


def test_unsupported_operator_names_it_and_its_index():
    m = ModelSpec()
    x = m.input("x", (1, 4, 4, 2))
    y, z = m.tensor("y", (1, 4, 4, 2)), m.tensor("z", (1, 4, 4, 2))
    m.op(BO.RELU, [x], [y])
    m.op(BO.SIN, [y], [z])
    m.outputs = [z]
    one_line_error(m.build(), r"^operator 1 \(SIN\): .*not supported")
    one_line_error(unary_model(BO.CUSTOM, custom="MyOp"), r"operator 0 \(CUSTOM 'MyOp'\)")
    one_line_error(unary_model(BO.DEQUANTIZE, out_type=TT.FLOAT32),
                   r"operator 0 \(DEQUANTIZE\).*int8 NPU")
    # An operator code above 127 lives in builtin_code only.
    one_line_error(unary_model(BO.SIGN), r"operator 0 \(SIGN\)")


def test_float_dynamic_and_unknown_shapes():
    one_line_error(unary_model(in_type=TT.FLOAT32, out_type=TT.FLOAT32), "FLOAT32")
    # a static shape whose signature leaves the batch open is planned at its shape, as
    # tvmc compile and TFLite Micro run it; an open shape is refused by the front door
    g = load_tflite(unary_model(signature=[-1, 4, 4, 2]))
    assert [t.shape for t in g.inputs] == [(1, 4, 4, 2)]
    m = ModelSpec()
    x = m.input("x", (-1, 4, 4, 2), signature=[-1, 4, 4, 2])
    y = m.tensor("y", (1, 4, 4, 2))
    m.op(BO.RELU, [x], [y])
    m.outputs = [y]
    one_line_error(m.build(), r"tensor 0 \('x'\) has a dynamic shape \(signature \[-1")
    one_line_error(unary_model(shape=()), "unknown or scalar shape")
    one_line_error(unary_model(shape=(1, 0, 4, 2)), r"^<bytes>: tensor 0 \('x'\) has an empty "
                   r"dimension in \[1, 0, 4, 2\]$")


def test_structural_errors():
    one_line_error(ModelSpec().build(subgraphs=False),
                   r"^<bytes>: invalid TFLite model: the model has no subgraph$")
    m = ModelSpec()
    x = m.input("x", (1, 4, 4, 2))
    one_line_error(m.build(version=2), r"^<bytes>: cannot import this model: schema version 2")
    y = m.tensor("y", (1, 4, 4, 2))
    m.op(BO.RELU, [x + 5], [y])
    m.outputs = [y]
    one_line_error(m.build(), r"operator 0 \(RELU\) input 0 refers to tensor 5; the subgraph "
                              "has 2 tensors")


def test_declared_shape_mismatch_is_caught():
    m = ModelSpec()
    x = m.input("x", (1, 8, 8, 4))
    y = m.tensor("y", (1, 8, 8, 8))  # VALID 3x3 would give 6x6
    m.op(BO.CONV_2D, [x, m.weights("w", (8, 3, 3, 4))], [y], conv_options(padding=1))
    m.outputs = [y]
    one_line_error(m.build(), r"operator 0 \(CONV_2D\): computed output shape \[1, 6, 6, 8\]")


@pytest.mark.parametrize("case,match", [
    ("strided", "only positive strides"),
    ("resize", "not an integer upscale"),
    ("align", "align_corners"),
    ("mean", "mean over H, W or both"),
    ("undefined", r"reads tensor 1 \('ghost'\), which is no graph input, constant or output"),
    ("const_weights", r"input 1 \('w'\) is not a constant; tvm-ethos needs constant weights"),
])
def test_unsupported_variants(case, match):
    m = ModelSpec()
    x = m.input("x", (1, 8, 8, 4))
    if case == "strided":
        y = m.tensor("y", (1, 4, 8, 4))
        m.op(BO.STRIDED_SLICE, [x, m.const("b", [0, 0, 0, 0]), m.const("e", [1, 8, 8, 4]),
                                m.const("s", [1, -1, 1, 1])], [y])
    elif case in ("resize", "align"):
        y = m.tensor("y", (1, 12, 12, 4) if case == "resize" else (1, 15, 15, 4))
        m.op(BO.RESIZE_NEAREST_NEIGHBOR, [x, m.const("s", [12, 12])], [y],
             ("ResizeNearestNeighborOptions", {"AlignCorners": int(case == "align")}))
    elif case == "mean":
        y = m.tensor("y", (1, 8, 8, 1))
        m.op(BO.MEAN, [x, m.const("a", [3])], [y], ("ReducerOptions", {"KeepDims": 1}))
    elif case == "undefined":
        ghost = m.tensor("ghost", (1, 8, 8, 4))
        y = m.tensor("y", (1, 8, 8, 4))
        m.op(BO.ADD, [x, ghost], [y])
    else:
        w = m.input("w", (8, 1, 1, 4))
        y = m.tensor("y", (1, 8, 8, 8))
        m.op(BO.CONV_2D, [x, w], [y], conv_options())
    m.outputs = [y]
    one_line_error(m.build(), r"operator 0 \(\w+\):? .*" + match)


def test_keep_num_dims_padv2_and_relu_n1_to_1():
    m = ModelSpec()
    x = m.input("x", (1, 2, 3, 8))
    r = m.tensor("r", (1, 2, 3, 8))
    m.op(BO.RELU_N1_TO_1, [x], [r])
    p = m.tensor("p", (1, 2, 5, 8))
    m.op(BO.PADV2, [r, m.const("pads", [[0, 0], [0, 0], [2, 0], [0, 0]]),
                    m.const("v", [0], np.int8, shape=[])], [p])
    y = m.tensor("y", (1, 2, 5, 6))
    m.op(BO.FULLY_CONNECTED, [p, m.weights("w", (6, 8)), m.const("b", np.zeros(6))], [y],
         ("FullyConnectedOptions", {"KeepNumDims": 1}))
    m.outputs = [y]
    interpreter = pytest.importorskip("ai_edge_litert.interpreter")
    it = interpreter.Interpreter(model_content=m.build())
    it.allocate_tensors()
    assert {d["name"]: tuple(d["shape"]) for d in it.get_tensor_details()}["y"] == (1, 2, 5, 6)
    g = load_tflite(m.build())
    assert [(p.name, p.kind, p.output.shape) for p in g.parts] == [
        ("relu_n1_to_1_0", "unary", (1, 2, 3, 8)),
        ("padv2_1", "pad", (1, 2, 5, 8)),
        ("fully_connected_2/reshape", "reshape", (10, 8)),
        ("fully_connected_2", "fully_connected", (10, 6)),
        ("fully_connected_2/unflatten", "reshape", (1, 2, 5, 6)),
    ]
    assert g.outputs[0].name == "y"


def test_an_int32_tensor_only_transposes_touch_is_planned_and_any_other_refused():
    """The NPU moves an int32 TRANSPOSE's bytes: its tensors are planned, four bytes an
    element, and up to eight axes; an int32 tensor any other operator reads stays refused."""
    m = ModelSpec()
    x = m.input("x", (2, 3, 1, 2, 3, 2, 2, 5), TT.INT32)
    t = m.tensor("t", (5, 3, 1, 2, 3, 2, 2, 2), TT.INT32)
    m.op(BO.TRANSPOSE, [x, m.const("perm", [7, 1, 2, 3, 4, 5, 6, 0])], [t])
    y = m.tensor("y", (3, 5, 1, 2, 3, 2, 2, 2), TT.INT32)
    m.op(BO.TRANSPOSE, [t, m.const("perm2", [1, 0, 2, 3, 4, 5, 6, 7])], [y])
    m.outputs = [y]
    g = load_tflite(m.build())
    assert [(p.kind, p.attr("perm"), p.output.dtype) for p in g.parts] == [
        ("transpose", (7, 1, 2, 3, 4, 5, 6, 0), "int32"),
        ("transpose", (1, 0, 2, 3, 4, 5, 6, 7), "int32")]
    assert g.inputs[0].dtype == "int32" and g.inputs[0].itemsize == 4
    m.ops[1]["code"] = BO.RELU
    m.ops[1]["inputs"] = [t]
    m.tensors[y]["shape"] = list(m.tensors[t]["shape"])
    one_line_error(m.build(), r"tensor 't' .* is INT32; .*read and written by TRANSPOSEs only")


def test_a_quantize_of_int16_into_an_int32_output_is_planned_and_its_reader_refused():
    """The NPU writes an int16 QUANTIZE's int32 output (an int32 OFM), four bytes an element;
    an operator reading that int32 tensor stays refused."""
    m = ModelSpec()
    x = m.input("x", (1, 4, 4, 8), TT.INT16)
    y = m.tensor("y", (1, 4, 4, 8), TT.INT32)
    m.op(BO.QUANTIZE, [x], [y])
    m.outputs = [y]
    g = load_tflite(m.build())
    assert [(p.attr("op"), p.output.dtype, p.output.itemsize) for p in g.parts] == [
        ("quantize", "int32", 4)]
    z = m.tensor("z", (1, 4, 4, 8), TT.INT32)
    m.op(BO.RELU, [y], [z])
    m.outputs = [z]
    one_line_error(m.build(), r"tensor 'y' .* is INT32; .*a QUANTIZE of int16 writes")
