"""Small ONNX models (QDQ int8 and float) built with ``onnx.helper``, as fuzz seeds.

Only imported when the optional ``onnx`` package is installed. ONNX is protobuf, so the
mutations are the generic byte-level ones (truncation, bit flips, overwritten spans, splices)
over the whole file.
"""
from __future__ import annotations

import numpy as np

from tests.reliability.tflite_mutator import Corpus, Layout, Seed


def _qdq_conv() -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rs = np.random.RandomState(0)
    w = rs.randint(-127, 128, size=(4, 3, 3, 3)).astype(np.int8)
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
        numpy_helper.from_array(np.array(3, np.int8), "x_zp"),
        numpy_helper.from_array(w, "w_q"),
        numpy_helper.from_array(np.array(0.01, np.float32), "w_scale"),
        numpy_helper.from_array(np.array(0, np.int8), "w_zp"),
        numpy_helper.from_array(rs.randint(-500, 500, size=4).astype(np.int32), "b_q"),
        numpy_helper.from_array(np.array(0.0005, np.float32), "b_scale"),
        numpy_helper.from_array(np.array(0, np.int32), "b_zp"),
        numpy_helper.from_array(np.array(0.1, np.float32), "y_scale"),
        numpy_helper.from_array(np.array(-5, np.int8), "y_zp"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["wd"]),
        helper.make_node("DequantizeLinear", ["b_q", "b_scale", "b_zp"], ["bd"]),
        helper.make_node("Conv", ["xd", "wd", "bd"], ["y"], pads=[1, 1, 1, 1],
                         strides=[1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["y"], ["yr"]),
        helper.make_node("QuantizeLinear", ["yr", "y_scale", "y_zp"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["out"]),
    ]
    g = helper.make_graph(nodes, "qdq_conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def _float_mlp() -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rs = np.random.RandomState(1)
    inits = [numpy_helper.from_array(rs.randn(16, 8).astype(np.float32), "w"),
             numpy_helper.from_array(rs.randn(8).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Softmax", ["a"], ["out"], axis=-1)]
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 8])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def onnx_corpus() -> Corpus:
    seeds = []
    for name, make in (("qdq_conv", _qdq_conv), ("float_mlp", _float_mlp)):
        data = make()
        seeds.append(Seed(name, data, Layout(len(data), [(0, len(data))], {}), 1.0))
    c = Corpus(seeds)
    c.kind = "onnx"
    return c
