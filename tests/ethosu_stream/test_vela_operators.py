"""One TFLite operator at a time (tests/tvm_ethos/tflite_builder.py), compiled by Vela's CLI
and run on the model, bit-exact with TFLite's reference kernels: the operator forms the
shipped models do not reach (SAME average pooling, dilation, LUT activations, multiple
outputs, broadcasts, nearest-neighbour upscaling), and CPU operators run around them."""
import numpy as np
import pytest
import tflite_builder as B
from conftest import oracle

from ethosu_stream.tflite_graph import TfliteGraph, run_vela_model
from tests.helpers.vela_cli import vela_compile

EXACT = {
    "conv_same": lambda rs: B.conv2d(rs),
    "conv_stride2_valid": lambda rs: B.conv2d(rs, stride=(2, 2), padding="VALID"),
    "conv_dilation2": lambda rs: B.conv2d(rs, dilation=(2, 2)),
    "conv_5x5_stride2": lambda rs: B.conv2d(rs, in_shape=(1, 11, 11, 5), kernel=(5, 5),
                                            stride=(2, 2)),
    "fully_connected": lambda rs: B.fully_connected(rs),
    "avg_pool_valid": lambda rs: B.pool(rs),
    "avg_pool_same": lambda rs: B.pool(rs, padding="SAME"),
    "max_pool_same": lambda rs: B.pool(rs, kind="max", padding="SAME"),
    "add": lambda rs: B.binary(rs),
    "add_broadcast": lambda rs: B.binary(rs, b_shape=(1, 1, 1, 8)),
    "sub": lambda rs: B.binary(rs, kind="sub"),
    "mul": lambda rs: B.binary(rs, kind="mul"),
    "mul_broadcast": lambda rs: B.binary(rs, kind="mul", b_shape=(1, 1, 1, 8)),
    "mean": lambda rs: B.mean(rs),
    "softmax": lambda rs: B.softmax(rs),
    "tanh": lambda rs: B.activation("tanh"),
    "sigmoid": lambda rs: B.activation("sigmoid"),
    "leaky_relu": lambda rs: B.activation("leaky_relu"),
    "pad": lambda rs: B.pad(),
    "pad_conv": lambda rs: B.pad_conv(rs),
    "split": lambda rs: B.split(),
    "resize_nearest": lambda rs: B.resize_nearest(),
    "resize_bilinear": lambda rs: B.resize_bilinear(),
    "resize_bilinear_half_pixel": lambda rs: B.resize_bilinear(half_pixel=True),
    "resize_bilinear_x4": lambda rs: B.resize_bilinear(size=(16, 16)),
}


def _inputs(model: bytes, rs):
    from ai_edge_litert.interpreter import Interpreter

    return [rs.randint(-128, 128, d["shape"]).astype(d["dtype"])
            for d in Interpreter(model_content=bytes(model)).get_input_details()]


# every operator on U55-128; a few on U65-256 too (dedicated SRAM: the fast-scratch region)
CASES = [(n, "ethos-u55-128") for n in sorted(EXACT)] + [
    (n, "ethos-u65-256") for n in ("avg_pool_same", "conv_same", "sigmoid", "softmax", "split")]


@pytest.mark.parametrize("name,config", CASES)
def test_operator_is_bit_exact(name, config):
    rs = np.random.RandomState(0)
    model = EXACT[name](rs)
    xs = _inputs(model, rs)
    got, _ = run_vela_model(vela_compile(model, config), xs, config)
    want = oracle(bytes(model), xs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.array_equal(g, w), f"{np.count_nonzero(g != w)} of {g.size} differ"


def _uint8_hard_swish(in_q, out_q, shape):
    x = B.T(list(shape), "uint8", scale=in_q[0], zp=in_q[1])
    y = B.T(list(shape), "uint8", scale=out_q[0], zp=out_q[1])
    return B.build([x, y], [0], [1], B.BO.HARD_SWISH)


#: uint8 tables Vela 5.2 writes (its GELU's table, computed in double, is one code off
#: LiteRT's float32 one, so it is not here)
UINT8 = {
    "sigmoid": lambda s: B.activation("sigmoid", s, (0.05, 128), (1 / 256, 0), dtype="uint8"),
    "tanh": lambda s: B.activation("tanh", s, (0.05, 128), (1 / 128, 128), dtype="uint8"),
    "leaky_relu": lambda s: B.activation("leaky_relu", s, (0.05, 128), (0.04, 120),
                                         dtype="uint8"),
    "hard_swish": lambda s: _uint8_hard_swish((0.05, 128), (0.04, 120), s),
}


@pytest.mark.parametrize("name,config", [("sigmoid", "ethos-u55-128")] + [
    pytest.param(n, c, marks=pytest.mark.slow)
    for n, c in [(n, "ethos-u55-128") for n in sorted(UINT8) if n != "sigmoid"]
    + [("sigmoid", "ethos-u65-256")]])
def test_a_uint8_table_is_read_at_the_codes_own_entry(name, config):
    """Vela's uint8 LOGISTIC, TANH, LEAKY_RELU and HARD_SWISH (a table of 256 uint8 entries in
    code order, TFLite Micro having no uint8 kernel for them) on every uint8 code, equal to
    LiteRT's reference kernel: the functional model looks a uint8 code up at its own entry
    (an int8-style ``code + 128`` would read almost every entry wrong)."""
    model = UINT8[name]((1, 4, 8, 8))
    codes = np.arange(256, dtype=np.uint8).reshape(1, 4, 8, 8)
    (got,), _ = run_vela_model(vela_compile(model, config), [codes], config)
    (want,) = oracle(bytes(model), [codes])
    assert len(np.unique(want)) > 20  # the table is not constant over the codes
    assert np.array_equal(got.reshape(want.shape), want), \
        f"{np.count_nonzero(got.reshape(want.shape) != want)} of 256 differ"

@pytest.mark.parametrize("make,cpu", [
    (lambda rs: B.depth_to_space(), ["DEPTH_TO_SPACE (operator 0)"]),
    (B.conv_resize_conv, ["RESIZE_BILINEAR (operator 1)"]),
])
def test_cpu_operators_run_through_tflite(make, cpu):
    """What Vela leaves on the CPU runs through TFLite's reference kernels around the ethos-u
    operators, in the file's order: bit-exact, and an output that follows the input."""
    rs = np.random.RandomState(0)
    model = make(rs)
    data = vela_compile(model, "ethos-u55-128")
    graph = TfliteGraph(data, "ethos-u55-128")
    assert graph.cpu_operators == cpu
    outs = []
    for seed in (1, 2):
        xs = _inputs(model, np.random.RandomState(seed))
        got, stats = graph.run(xs)
        want = oracle(bytes(model), xs)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        outs.append(got[0])
    assert not np.array_equal(*outs)
    # two ethos-u operators around the resize: both streams ran, and their counts add up
    if "RESIZE" in cpu[0]:
        assert stats.commands["NPU_OP_STOP"] == 2 and stats.commands["NPU_OP_CONV"] >= 2
