"""Each quantized operator kind on its own, bit-exact with the TFLite reference kernels,
on the NPU emulator (ethos-u / ethos-n) and on the exact host kernels (llvm)."""
import zlib

import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact

import tvm_ethos

CASES = {
    "conv_same": lambda rs: tb.conv2d(rs),
    "conv_valid_stride2": lambda rs: tb.conv2d(
        rs, in_shape=(1, 9, 9, 3), stride=(2, 2), padding="VALID"
    ),
    "conv_same_stride2_relu6": lambda rs: tb.conv2d(
        rs, in_shape=(1, 10, 7, 5), stride=(2, 2), act="relu6"
    ),
    "conv_dilation2": lambda rs: tb.conv2d(
        rs, in_shape=(1, 10, 10, 3), dilation=(2, 2), act="relu"
    ),
    "conv_5x3_per_tensor": lambda rs: tb.conv2d(rs, kernel=(5, 3), per_channel=False),
    "depthwise": lambda rs: tb.conv2d(rs, depthwise=True, act="relu"),
    "depthwise_stride2_mult3": lambda rs: tb.conv2d(
        rs, in_shape=(1, 8, 8, 1), depthwise=True, multiplier=3, stride=(2, 2)
    ),
    "fully_connected": lambda rs: tb.fully_connected(rs, act="relu"),
    "avg_pool_valid": lambda rs: tb.pool(rs, "avg"),
    "avg_pool_same": lambda rs: tb.pool(
        rs, "avg", in_shape=(1, 7, 7, 4), size=(3, 3), stride=(1, 1), padding="SAME"
    ),
    "max_pool_same": lambda rs: tb.pool(
        rs, "max", in_shape=(1, 7, 7, 4), size=(3, 3), stride=(2, 2), padding="SAME"
    ),
    "add": lambda rs: tb.binary(rs, "add", act="relu"),
    "add_broadcast": lambda rs: tb.binary(rs, "add", a_shape=(1, 4, 4, 8), b_shape=(1, 1, 1, 8)),
    "mul": lambda rs: tb.binary(rs, "mul"),
    "mul_broadcast": lambda rs: tb.binary(rs, "mul", a_shape=(1, 4, 4, 8), b_shape=(1, 4, 1, 8)),
    "mean": lambda rs: tb.mean(rs),
    "softmax": lambda rs: tb.softmax(rs),
    "softmax_4d_beta": lambda rs: tb.softmax(rs, shape=(1, 3, 4, 10), beta=0.7),
    "sigmoid": lambda rs: tb.activation(
        "sigmoid", in_q=(rs.uniform(0.01, 0.1), int(rs.randint(-20, 20)))
    ),
    "tanh": lambda rs: tb.activation(
        "tanh", in_q=(rs.uniform(0.01, 0.1), int(rs.randint(-20, 20)))
    ),
    "leaky_relu": lambda rs: tb.activation("leaky_relu", alpha=rs.uniform(0.05, 0.5)),
    "resize_bilinear": lambda rs: tb.resize_bilinear(
        q=(rs.uniform(0.01, 0.1), int(rs.randint(-20, 20)))
    ),
}


@pytest.mark.parametrize("target", ["ethos-u,llvm", "llvm"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_bit_exact(case, target):
    rs = np.random.RandomState(zlib.crc32(case.encode()) % 1000)
    model = CASES[case](rs)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    assert_bit_exact(cm, model, n_inputs=3, seed=1)
    if target == "llvm":
        assert set(cm.partition_summary) == {"llvm"}
    else:
        assert cm.partition_summary == {"ethos-u": 1}, cm.partition_report


@pytest.mark.parametrize(
    "case", ["conv_same", "depthwise", "add", "max_pool_same", "sigmoid", "tanh", "leaky_relu"]
)
def test_operator_on_ethos_n(case):
    rs = np.random.RandomState(7)
    model = CASES[case](rs)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-n,llvm")
    assert cm.partition_summary == {"ethos-n": 1}, cm.partition_report
    assert_bit_exact(cm, model, n_inputs=3, seed=2)
