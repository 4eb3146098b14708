"""ONNX (QDQ) and PyTorch (torch.export) models through load_model -> partition -> compile.

ONNX oracle: onnxruntime with graph optimizations off, so it runs the QDQ graph literally:
float Conv / Add between QuantizeLinear (x / scale rounded half to even) and DequantizeLinear.
The NPU runs a quantized ADD with TFLite's fixed-point arithmetic (both inputs shifted left by
20 bits, Q31 multipliers, rounding half away from zero), which is not the same function: the
two agree to one output step, and exactly on most elements. That tolerance is what the
semantics force; an unpartitioned llvm build of the same module is a bit-exact check of the
partitioning and offload (not of the arithmetic: it runs the same integer kernel on the host).
"""
import os
import sys

import numpy as np
import pytest

import tvm_ethos
from tvm_ethos.errors import ModelLoadError, UnsupportedModelError

S_O = 0.15  # output scale of the QDQ model below


def qdq_conv_add_mul(rs):
    """x -> Q/DQ -> Conv (int8 per-channel weights, int32 bias) -> Q/DQ -> Add(y, y) -> Q/DQ
    -> Mul(., DQ(int8 per-tensor const)) -> Q/DQ."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def c(name, arr):
        return numpy_helper.from_array(arr, name)

    s_w = rs.uniform(0.002, 0.02, 4).astype(np.float32)
    inits = [
        c("s_x", np.array(0.05, np.float32)), c("z_x", np.array(3, np.int8)),
        c("w", rs.randint(-127, 128, size=(4, 3, 3, 3)).astype(np.int8)), c("s_w", s_w),
        c("z_w", np.zeros(4, np.int8)),
        c("b", rs.randint(-500, 500, size=4).astype(np.int32)),
        c("s_b", (np.float32(0.05) * s_w).astype(np.float32)), c("z_b", np.zeros(4, np.int32)),
        c("s_y", np.array(0.1, np.float32)), c("z_y", np.array(-4, np.int8)),
        c("s_a", np.array(0.17, np.float32)), c("z_a", np.array(2, np.int8)),
        c("k", rs.randint(-128, 128, size=(1, 4, 8, 8)).astype(np.int8)),
        c("s_k", np.array(0.02, np.float32)), c("z_k", np.array(-1, np.int8)),
        c("s_o", np.array(S_O, np.float32)), c("z_o", np.array(5, np.int8)),
    ]
    n = helper.make_node
    nodes = [
        n("QuantizeLinear", ["x", "s_x", "z_x"], ["xq"]),
        n("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"]),
        n("DequantizeLinear", ["w", "s_w", "z_w"], ["wd"], axis=0),
        n("DequantizeLinear", ["b", "s_b", "z_b"], ["bd"], axis=0),
        n("Conv", ["xd", "wd", "bd"], ["y"], pads=[1, 1, 1, 1]),
        n("QuantizeLinear", ["y", "s_y", "z_y"], ["yq"]),
        n("DequantizeLinear", ["yq", "s_y", "z_y"], ["yd"]),
        n("Add", ["yd", "yd"], ["a"]),
        n("QuantizeLinear", ["a", "s_a", "z_a"], ["aq"]),
        n("DequantizeLinear", ["aq", "s_a", "z_a"], ["ad"]),
        n("DequantizeLinear", ["k", "s_k", "z_k"], ["kd"]),
        n("Mul", ["ad", "kd"], ["m"]),
        n("QuantizeLinear", ["m", "s_o", "z_o"], ["mq"]),
        n("DequantizeLinear", ["mq", "s_o", "z_o"], ["out"]),
    ]
    g = helper.make_graph(
        nodes,
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def _ort(model, x):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_onnx_qdq_partitions_onto_ethos_u_and_matches_onnxruntime(tmp_path):
    rs = np.random.RandomState(0)
    model = qdq_conv_add_mul(rs)
    path = tmp_path / "qdq.onnx"
    path.write_bytes(model.SerializeToString())
    mod = tvm_ethos.load_model(str(path))
    cm = tvm_ethos.compile(mod, target="ethos-u,llvm")
    rep = cm.partition_report
    placed = {op.tflite_name: (op.placed_on, op.via) for op in rep.operators}
    assert placed["ADD"] == ("ethos-u", "npu") and placed["MUL"] == ("ethos-u", "npu"), str(rep)
    # the ADD and MUL form one NPU subgraph
    assert len({op.subgraph for op in rep.on("ethos-u")}) == 1
    # ONNX Conv is NCHW with its bias reshaped to (1, C, 1, 1): no QDQ pattern takes it
    assert placed["CONV2D"] == ("llvm", "tvm")
    host = tvm_ethos.compile(mod, target="llvm")
    diffs = []
    for k in range(4):
        x = rs.uniform(-6, 6, size=(1, 3, 8, 8)).astype(np.float32)
        (got,) = cm.run(x)
        np.testing.assert_array_equal(got, host.run(x)[0])
        want = _ort(model, x)
        steps = np.abs(got.astype(np.float64) - want) / S_O
        assert steps.max() <= 1 + 1e-4, f"{steps.max()} output steps apart"
        diffs.append(float(np.mean(steps > 0.5)))
    assert np.mean(diffs) < 0.05, f"{np.mean(diffs):.1%} of the elements differ by one step"


# ------------------------------------------------------------------------------ PyTorch
def _import_torch():
    """torch is the optional 'torch' extra, not in make install; ``make test-torch`` (which CI
    runs) provides it and sets TVM_ETHOS_REQUIRE_TORCH, so there a missing torch fails."""
    if os.environ.get("TVM_ETHOS_REQUIRE_TORCH"):
        import torch
        return torch
    return pytest.importorskip("torch")


def _torch_model():
    torch = _import_torch()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4 * 8 * 8, 5)

        def forward(self, x):
            return torch.softmax(self.fc(torch.relu(self.conv(x)).flatten(1)), -1)

    torch.manual_seed(0)
    return Net().eval()


def test_torch_float_model_compiles_for_ethos_u_on_the_host():
    net = _torch_model()
    import torch

    x = torch.randn(1, 3, 8, 8)
    mod = tvm_ethos.load_model(net, example_inputs=(x,))
    cm = tvm_ethos.compile(mod, target="ethos-u,llvm")
    rep = cm.partition_report
    assert rep.summary() == {"llvm": len(rep.operators)} and len(rep.operators) >= 5
    # float operators: TVM's own lowering on the host, and the report says why
    for op in rep.operators:
        assert op.via == "tvm"
        reasons = op.rejections["ethos-u"]
        assert reasons == ["not a quantized operator (no QDQ pattern matches)"] or \
            reasons[0] == "input 0 has type float32; supported: int8, uint8, int16", reasons
    assert "not a quantized operator" in str(rep)
    (got,) = cm.run(x.numpy())
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the same through an ExportedProgram and through a (module, inputs) pair
    prog = torch.export.export(net, (x,))
    for obj in (prog, (net, (x,))):
        (again,) = tvm_ethos.compile(tvm_ethos.load_model(obj), target="llvm").run(x.numpy())
        np.testing.assert_allclose(again, want, rtol=1e-5, atol=1e-6)


def test_torch_module_without_example_inputs_is_a_clear_error():
    with pytest.raises(ModelLoadError, match="needs example_inputs"):
        tvm_ethos.load_model(_torch_model())


def test_torch_not_installed_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(UnsupportedModelError, match=r"optional 'torch' package .*torch==2\.13\.0"):
        tvm_ethos.load_model(object(), example_inputs=(1,))
