"""MEAN (global average over H and W) and AVERAGE_POOL_2D bit-exact with TFLite's reference
kernels over random quantization parameters (input/output scale and zero point differing or
equal), alone and after a convolution."""
import graph_builder as gb
import numpy as np
import pytest
import tflite_builder as tb
from conftest import oracle
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tvm_ethos.compute.quant import mbqm_np
from tvm_ethos.compute.te_ops import mean_multiplier

SHAPES = [(1, 7, 7), (1, 3, 3), (1, 5, 4), (1, 8, 8), (1, 2, 6), (1, 1, 1)]


def mean_model(shape, in_q, out_q, keep_dims=True):
    x = tb.T(shape, "int8", scale=in_q[0], zp=in_q[1])
    axis = tb.T([2], "int32", data=np.array([1, 2], np.int32))
    y = tb.T(
        [shape[0], 1, 1, shape[3]] if keep_dims else [shape[0], shape[3]],
        "int8",
        scale=out_q[0],
        zp=out_q[1],
    )

    def opts(b):
        tb.tflite.ReducerOptionsStart(b)
        tb.tflite.ReducerOptionsAddKeepDims(b, keep_dims)
        return tb.tflite.ReducerOptionsEnd(b)

    return tb.build(
        [x, axis, y], [0], [2], tb.BO.MEAN, tb.BOPT.ReducerOptions, opts, op_inputs=[0, 1]
    )


def random_quant(rs, equal):
    in_q = (float(rs.uniform(0.002, 0.5)), int(rs.randint(-128, 128)))
    out_q = in_q if equal else (float(rs.uniform(0.002, 0.5)), int(rs.randint(-128, 128)))
    return in_q, out_q


def check(cm, model, rs, n_inputs=2):
    for _ in range(n_inputs):
        xs = [rs.randint(-128, 128, size=s).astype(np.int8) for s in _input_shapes(model)]
        got, ref = cm.run(*xs)[0], oracle(model, xs)[0]
        diff = np.abs(got.reshape(ref.shape).astype(np.int64) - ref.astype(np.int64))
        assert diff.max() == 0, f"max diff {diff.max()} at {np.argwhere(diff)[:5].tolist()}"


def _input_shapes(model):
    from ai_edge_litert.interpreter import Interpreter

    return [tuple(d["shape"]) for d in Interpreter(model_content=model).get_input_details()]


# -------------------------------------------------------------- integer arithmetic vs LiteRT
@settings(max_examples=150, deadline=None, derandomize=True)
@given(hw=st.tuples(st.integers(1, 16), st.integers(1, 16)), c=st.integers(1, 8),
       s_in=st.floats(0.001, 1.0), s_out=st.floats(0.001, 1.0),
       z_in=st.integers(-128, 127), z_out=st.integers(-128, 127), equal=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_mean_arithmetic_matches_reference(hw, c, s_in, s_out, z_in, z_out, equal, seed):
    """The folded multiplier of mean_multiplier (what lower_mean applies) against LiteRT."""
    if equal:
        s_out, z_out = s_in, z_in
    shape = (1, hw[0], hw[1], c)
    x = np.random.RandomState(seed).randint(-128, 128, size=shape).astype(np.int8)
    mult, shift = mean_multiplier(float(np.float32(s_in)), float(np.float32(s_out)), hw[0] * hw[1])
    acc = (x.astype(np.int64) - z_in).sum(axis=(1, 2), keepdims=True)
    got = np.clip(mbqm_np(acc, mult, shift) + z_out, -128, 127)
    ref = oracle(mean_model(shape, (s_in, z_in), (s_out, z_out)), [x])[0]
    np.testing.assert_array_equal(got.reshape(ref.shape), ref)


# -------------------------------------------------------------- compiled MEAN
MEAN_CASES = [(i, SHAPES[i % len(SHAPES)]) for i in range(24)]


@pytest.mark.parametrize("seed,hw", MEAN_CASES)
def test_mean_random_quant(seed, hw):
    rs = np.random.RandomState(1000 + seed)
    shape = (*hw, int(rs.randint(1, 17)))
    in_q, out_q = random_quant(rs, equal=seed % 4 == 0)
    keep = seed % 6 != 5
    target = "ethos-u,llvm" if seed % 2 else "llvm"
    model = mean_model(shape, in_q, out_q, keep_dims=keep)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    check(cm, model, rs)


# -------------------------------------------------------------- conv -> mean (-> broadcast add)
def _requant(g, t, rs):
    g.tensors[t].scale = np.atleast_1d(np.float32(rs.uniform(0.005, 0.3)))
    g.tensors[t].zp = np.atleast_1d(np.int64(rs.randint(-100, 100)))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("with_add", [False, True])
def test_conv_mean_graph(seed, with_add):
    rs = np.random.RandomState(2000 + seed)
    h, w = [(7, 7), (3, 3), (5, 4), (6, 6)][seed % 4]
    g = gb.Graph(rs)
    x = g.input((1, h, w, 4))
    a = g.conv2d(x, 8, act="relu" if seed % 3 == 0 else None)
    m = g.mean(a)
    _requant(g, m, rs)
    y = g.add(a, m) if with_add else m
    model = g.build([y])
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-u,llvm")
    check(cm, model, rs)


# -------------------------------------------------------------- AVERAGE_POOL_2D
POOLS = [((1, 9, 9, 8), (3, 3), (2, 2), "VALID"), ((1, 7, 7, 4), (3, 3), (1, 1), "SAME"),
         ((1, 6, 5, 3), (2, 3), (2, 2), "SAME"), ((1, 7, 7, 5), (7, 7), (1, 1), "VALID")]


@pytest.mark.parametrize("seed", range(8))
def test_avg_pool_random_quant(seed):
    rs = np.random.RandomState(3000 + seed)
    shape, size, stride, padding = POOLS[seed % len(POOLS)]
    # TFLite requires output quant = input quant; draw it over the whole zero point range
    q = (float(rs.uniform(0.002, 0.5)), int(rs.randint(-128, 128)))
    if padding == "SAME":
        oh, ow = -(-shape[1] // stride[0]), -(-shape[2] // stride[1])
    else:
        oh, ow = (shape[1] - size[0]) // stride[0] + 1, (shape[2] - size[1]) // stride[1] + 1
    x = tb.T(shape, "int8", scale=q[0], zp=q[1])
    y = tb.T([1, oh, ow, shape[3]], "int8", scale=q[0], zp=q[1])
    pad = tb.tflite.Padding.SAME if padding == "SAME" else tb.tflite.Padding.VALID

    def opts(b):
        tb.tflite.Pool2DOptionsStart(b)
        tb.tflite.Pool2DOptionsAddPadding(b, pad)
        tb.tflite.Pool2DOptionsAddStrideW(b, stride[1])
        tb.tflite.Pool2DOptionsAddStrideH(b, stride[0])
        tb.tflite.Pool2DOptionsAddFilterWidth(b, size[1])
        tb.tflite.Pool2DOptionsAddFilterHeight(b, size[0])
        tb.tflite.Pool2DOptionsAddFusedActivationFunction(
            b, tb.ACT["relu" if seed % 3 == 0 else None]
        )
        return tb.tflite.Pool2DOptionsEnd(b)

    model = tb.build([x, y], [0], [1], tb.BO.AVERAGE_POOL_2D, tb.BOPT.Pool2DOptions, opts)
    target = "ethos-u,llvm" if seed % 2 else "llvm"
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    check(cm, model, rs)
