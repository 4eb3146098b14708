"""LOGISTIC, TANH, LEAKY_RELU and SOFTMAX on int8: the compile-time tables and the kernels,
bit-exact with the LiteRT interpreter, and the partition decisions of each NPU's checks.

The oracle is ai-edge-litert. LOGISTIC / TANH tables agree with every op resolver (reference,
builtin, builtin + XNNPack); SOFTMAX is the reference resolver's fixed-point kernel (the
builtin one tabulates ``expf`` and differs on rare ties, test_softmax_reference.py); LEAKY_RELU
agrees with the builtin kernels with or without the reference resolver, while XNNPack's
float-based int8 leaky relu differs (it is not what the NPU emulator reproduces), so the tests
use the resolvers without XNNPack."""
import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact, oracle
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tvm import relax

import tvm_ethos
from planner import parts as P
from planner.graph import Tensor
from tests.helpers.tflite_oracle import tflm_oracle, tflm_random_inputs
from tvm_ethos.compute.fixed_point import softmax_8bit
from tvm_ethos.compute.quant import leaky_relu_lut, logistic_lut, tanh_lut

ALL_CODES = np.arange(-128, 128, dtype=np.int8)


def _interpreter(model, x, resolver):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model,
                     experimental_op_resolver_type=getattr(OpResolverType, resolver))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


def _table(kind, in_q, out_q, alpha):
    if kind == "sigmoid":
        return logistic_lut("int8", in_q, out_q)
    if kind == "tanh":
        return tanh_lut("int8", in_q, out_q)
    return leaky_relu_lut("int8", in_q, out_q, alpha)


scales = st.floats(1e-3, 0.5).map(lambda v: float(np.float32(v)))
zero_points = st.integers(-128, 127)


# ------------------------------------------------------------------ float32 helpers
@settings(max_examples=300, deadline=None)
@given(v=st.one_of(st.floats(-1e6, 1e6, width=32),
                   st.integers(-4000, 4000).map(lambda k: k / 2.0),      # exact halves
                   st.sampled_from([0.49999997, -0.49999997, 2.4999998, 8388607.5])))
def test_round_half_away_is_c_roundf(v):
    from tvm_ethos.compute.quant import libm_f32, round_half_away_f32

    assert round_half_away_f32(np.float32(v)) == libm_f32("roundf", v)


# ------------------------------------------------------------------ tables vs the interpreter
@settings(max_examples=30, deadline=None)
@given(
    kind=st.sampled_from(["sigmoid", "tanh", "leaky_relu"]),
    s_in=scales,
    z_in=zero_points,
    s_out=scales,
    z_out=zero_points,
    alpha=st.floats(0.0, 3.0).map(lambda v: float(np.float32(v))),
)
@example(kind="leaky_relu", s_in=0.3125, z_in=5, s_out=0.6000000238418579, z_out=-4,
         alpha=-0.3)  # negative alpha: the magnitude is applied, then negated (v=-124: 19)
def test_table_matches_interpreter_on_every_code(kind, s_in, z_in, s_out, z_out, alpha):
    # LOGISTIC's int8 kernel requires its output quantization; TANH and LEAKY_RELU take any
    out_q = tb.ACTIVATION_OUT_Q["sigmoid"] if kind == "sigmoid" else (s_out, z_out)
    model = tb.activation(kind, shape=(1, 256), in_q=(s_in, z_in), out_q=out_q, alpha=alpha)
    table = _table(kind, (s_in, z_in), out_q, alpha)
    for resolver in ("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"):
        want = _interpreter(model, ALL_CODES.reshape(1, 256), resolver).ravel()
        bad = np.flatnonzero(table != want)
        assert bad.size == 0, (
            f"{resolver}: codes {ALL_CODES[bad][:5]} give {table[bad][:5]}, want {want[bad][:5]}"
        )


@settings(max_examples=30, deadline=None)
@given(s_in=st.floats(1e-3, 1.0).map(lambda v: float(np.float32(v))), z_in=zero_points,
       beta=st.sampled_from([1.0, 0.5, 2.0, 0.1, 1.7]),
       shape=st.sampled_from([(1, 10), (3, 7), (2, 1), (1, 2, 3, 17), (1, 300)]),
       seed=st.integers(0, 2**16), dtype=st.sampled_from(["int8", "uint8"]))
def test_softmax_model_matches_interpreter(s_in, z_in, beta, shape, seed, dtype):
    """The numpy statement of TFLite's 8-bit SOFTMAX (what the TE kernel computes) against the
    reference resolver, int8 and uint8."""
    lo = -128 if dtype == "int8" else 0
    model = tb.softmax(None, shape=shape, beta=beta, in_q=(s_in, z_in + 128 + lo), dtype=dtype)
    x = np.random.RandomState(seed).randint(lo, lo + 256, size=shape).astype(dtype)
    mine = softmax_8bit(x, s_in, beta, dtype)
    np.testing.assert_array_equal(mine, _interpreter(model, x, "BUILTIN_REF"))


# ------------------------------------------------------------------ kernels in the compile path
ACT_TARGETS = {"ethos-u,llvm": "ethos-u", "ethos-n,llvm": "ethos-n", "llvm": "llvm"}


@pytest.mark.parametrize("target", sorted(ACT_TARGETS))
@pytest.mark.parametrize("kind,in_q,out_q", [
    ("sigmoid", (0.07, -9), None),
    ("tanh", (0.031, 17), None),
    ("tanh", (0.2, -100), (0.011, 4)),          # not Ethos-N's quantization: host there
    ("leaky_relu", (0.05, 3), (0.04, -2)),
    ("leaky_relu", (0.013, -60), (0.09, 100)),
])
def test_activation_kernel_every_code(kind, in_q, out_q, target):
    model = tb.activation(kind, shape=(1, 4, 8, 8), in_q=in_q, out_q=out_q, alpha=0.3)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    want_on = ACT_TARGETS[target]
    if target == "ethos-n,llvm" and out_q is not None and kind == "tanh":
        want_on = "llvm"
    assert cm.partition_summary == {want_on: 1}, cm.partition_report
    x = np.random.RandomState(0).permutation(ALL_CODES).reshape(1, 4, 8, 8)
    (got,) = cm.run(x)
    np.testing.assert_array_equal(got, oracle(model, [x])[0])


@pytest.mark.parametrize("target", ["ethos-u,llvm", "llvm"])
@pytest.mark.parametrize("shape,beta,in_q", [
    ((1, 10), 1.0, (0.06, -20)),
    ((4, 1000), 1.0, (0.02, 5)),                 # long rows: the float32 sum's order matters
    ((1, 2, 5, 33), 0.5, (0.3, 100)),           # wide scale: most exponentials underflow
    ((2, 16), 2.5, (0.004, -128)),              # beta restored by the frontend
])
def test_softmax_kernel_bit_exact(shape, beta, in_q, target):
    model = tb.softmax(None, shape=shape, beta=beta, in_q=in_q)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    assert cm.partition_summary == {target.split(",")[0]: 1}, cm.partition_report
    assert_bit_exact(cm, model, n_inputs=10, seed=4)


def test_frontend_restores_softmax_beta():
    """TVM's importer emits softmax(x) for SOFTMAX(beta); the frontend puts beta back."""
    mod = tvm_ethos.load_model(tb.softmax(None, shape=(1, 8), beta=0.25, in_q=(0.1, 0)))
    mults = [b.value for blk in mod["main"].body.blocks for b in blk.bindings
             if isinstance(b.value, relax.Call) and b.value.op.name == "relax.multiply"]
    assert len(mults) == 1 and float(mults[0].args[1].value.numpy()) == 0.25
    plain = tvm_ethos.load_model(tb.softmax(None, shape=(1, 8), beta=1.0, in_q=(0.1, 0)))
    assert "multiply" not in str(plain["main"])


# ------------------------------------------------------------------ partition decisions
def _only(report):
    (op,) = report.operators
    return op


def test_ethos_n_tanh_needs_its_output_quantization():
    model = tb.activation("tanh", in_q=(0.05, 0), out_q=(0.01, 5))
    op = _only(tvm_ethos.partition_report(tvm_ethos.load_model(model), "ethos-n,llvm"))
    assert op.placed_on == "llvm" and op.via == "kernel"
    assert op.rejections["ethos-n"] == [
        "tanh output quantization (scale 0.01, zero point 5); Ethos-N needs scale 1/128, "
        "zero point 0"
    ]


def test_ethos_n_sigmoid_needs_its_output_quantization():
    rep = tvm_ethos.partition_report(tvm_ethos.load_model(tb.activation("sigmoid")), "ethos-n,llvm")
    assert _only(rep).placed_on == "ethos-n"
    # a model quantized otherwise (the TE table takes it; TFLite itself refuses it)
    mod = tvm_ethos.load_model(tb.activation("tanh", out_q=(1 / 256, -128)))
    assert _only(tvm_ethos.partition_report(mod, "ethos-n,llvm")).rejections["ethos-n"]


@pytest.mark.parametrize("alpha,on_n", [(0.2, True), (1.5, False), (0.0, False)])
def test_leaky_relu_alpha_on_ethos_n(alpha, on_n):
    mod = tvm_ethos.load_model(tb.activation("leaky_relu", alpha=alpha))
    op = _only(tvm_ethos.partition_report(mod, "ethos-n,llvm"))
    if on_n:
        assert op.placed_on == "ethos-n"
    else:
        assert op.placed_on == "llvm"
        assert op.rejections["ethos-n"] == [
            f"leaky relu alpha {alpha:g}; Ethos-N needs 0 < alpha < 1"
        ]
    # Vela lists LEAKY_RELU without an alpha constraint
    assert _only(tvm_ethos.partition_report(mod, "ethos-u,llvm")).placed_on == "ethos-u"


def test_softmax_on_ethos_u_not_on_ethos_n():
    mod = tvm_ethos.load_model(tb.softmax(np.random.RandomState(1)))
    assert _only(tvm_ethos.partition_report(mod, "ethos-u,llvm")).placed_on == "ethos-u"
    op = _only(tvm_ethos.partition_report(mod, "ethos-n,llvm"))
    assert (op.placed_on, op.via) == ("llvm", "kernel")
    assert op.rejections["ethos-n"] == ["operator SOFTMAX is not supported"]


def test_ethos_u_softmax_constraints():
    wide = tvm_ethos.load_model(tb.softmax(None, shape=(1, 256, 257, 1), in_q=(0.1, 0)))
    op = _only(tvm_ethos.partition_report(wide, "ethos-u,llvm"))
    assert op.rejections["ethos-u"] == [
        "IFM height x width 65792; the product must be in the range [1, 65535]"]
    # TFLite's interpreters abort on a negative beta: the front door refuses the model
    model = tb.softmax(None, shape=(1, 12), beta=-1.0, in_q=(0.05, 3))
    with pytest.raises(tvm_ethos.UnsupportedModelError, match="beta -1.0 with input scale"):
        tvm_ethos.load_model(model)


def test_softmax_not_over_the_last_axis_goes_to_tvm():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 6, 4), "int8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            d = bb.emit(
                relax.op.dequantize(x, relax.const(0.05, "float32"), relax.const(0, "int32"))
            )
            s = bb.emit(relax.op.nn.softmax(d, axis=1))
            q = bb.emit_output(
                relax.op.quantize(
                    s, relax.const(1 / 256, "float32"), relax.const(-128, "int32"), out_dtype="int8"
                )
            )
        bb.emit_func_output(q)
    rep = tvm_ethos.partition_report(bb.get(), "ethos-u,llvm")
    op = _only(rep)
    assert (op.placed_on, op.via) == ("llvm", "tvm")
    assert any("softmax over axis 1 of a 3-D tensor" in r for r in op.rejections["ethos-u"])


# ------------------------------------------------------------------ planner Parts
def test_parts_of_an_activation_chain():
    """LOGISTIC -> TANH -> LEAKY_RELU -> SOFTMAX in one Ethos-U subgraph: unary Parts with the
    identity propagator (planner.parts.unary) and the planner's softmax kind; tables are not
    Part inputs (Vela keeps LUTs in the NPU's LUT memory). The TANH reads the LOGISTIC's
    1/256, where the NPU's table (TFLite Micro's fixed point, rfcs/0007) and LiteRT's differ:
    the oracle is TFLite Micro."""
    from tvm_ethos.emulator.part_matchers import match_subgraph
    from tvm_ethos.partition import partition
    from tvm_ethos.pipeline.npu_subgraphs import lower_npu_subgraphs

    shape = [1, 4, 4, 8]
    ts = [tb.T(shape, "int8", scale=0.05, zp=3), tb.T(shape, "int8", scale=1 / 256, zp=-128),
          tb.T(shape, "int8", scale=1 / 128, zp=0), tb.T(shape, "int8", scale=0.01, zp=-5),
          tb.T(shape, "int8", scale=1 / 256, zp=-128)]

    def lr(b):
        tb.tflite.LeakyReluOptionsStart(b)
        tb.tflite.LeakyReluOptionsAddAlpha(b, 0.2)
        return tb.tflite.LeakyReluOptionsEnd(b)

    def so(b):
        tb.tflite.SoftmaxOptionsStart(b)
        tb.tflite.SoftmaxOptionsAddBeta(b, 1.0)
        return tb.tflite.SoftmaxOptionsEnd(b)

    model = tb.serialize(ts, [(tb.BO.LOGISTIC, 0, None, [0], [1]), (tb.BO.TANH, 0, None, [1], [2]),
                              (tb.BO.LEAKY_RELU, tb.BOPT.LeakyReluOptions, lr, [2], [3]),
                              (tb.BO.SOFTMAX, tb.BOPT.SoftmaxOptions, so, [3], [4])], [0], [4])
    mod = tvm_ethos.load_model(model)
    cm = tvm_ethos.compile(mod, target="ethos-u,llvm")
    assert cm.partition_summary == {"ethos-u": 4}
    assert len({op.subgraph for op in cm.partition_report.operators}) == 1
    rs = np.random.RandomState(0)
    for _ in range(3):
        xs = tflm_random_inputs(model, rs)
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(shape), tflm_oracle(model, xs)[0])
    (lw,) = lower_npu_subgraphs(partition(mod, "ethos-u,llvm")[0]).values()
    parts = [mp.part for mp in match_subgraph(lw).parts]
    assert [(p.kind, dict(p.attrs).get("op")) for p in parts] == [
        ("unary", "sigmoid"), ("unary", "tanh"), ("unary", "leaky_relu"), ("softmax", None)]
    ref = P.unary("ref", Tensor("x", tuple(shape)), op="sigmoid")
    for p in parts[:3]:
        assert len(p.inputs) == 1 and p.propagators == ref.propagators
    assert dict(parts[3].attrs)["beta"] == 1.0
