"""TFLite's int8 BATCH_MATMUL through the importer: on the Ethos-U as Vela 5.2 lowers it
(``ops_batch_matmul``: per output column a MUL and a REDUCE_SUM, the second operand
transposed first), and on the llvm host as TFLite Micro's integer kernel
(``te_ops.lower_batch_matmul``), each equal to TFLite Micro's over shapes, broadcast batches,
quantization and both adj flags; a stripe of the output is the same operations over its box;
a 5-D product stays a TFLite operator."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st
from operator_models import _opts

import tvm_ethos
from ethosu_stream import Memory, run_stream
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.tflite_oracle import compiled_matches, inputs_for, tflm_oracle
from tests.helpers.vela_cli import vela_compile
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, block_config
from tvm_ethos.backends.ethos_u.ops_batch_matmul import batch_matmul_ops, work_bytes
from tvm_ethos.backends.ethos_u.stream_base import Flash, vela_api
from tvm_ethos.backends.ethos_u.stream_ops import Emission
from tvm_ethos.patterns import QOp

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def bmm_model(a_shape, b_shape, adj_x=False, adj_y=False, a_q=(0.05, 3), b_q=(0.03, -4),
              out_q=(0.2, 1), constant: int | None = None, seed: int = 0) -> bytes:
    """One int8 BATCH_MATMUL of operands ``a_shape`` and ``b_shape`` (as stored: an operand
    with its adj flag set holds its matrix transposed), the output as TFLite's shape rule
    gives it; operand ``constant`` (0 or 1; None: neither) a constant of random codes
    (``seed``), the other the model's one input."""
    a = np.zeros(a_shape)
    b = np.zeros(b_shape)
    out = np.matmul(a.swapaxes(-1, -2) if adj_x else a, b.swapaxes(-1, -2) if adj_y else b)
    codes = [None, None]
    if constant is not None:
        shape = (a_shape, b_shape)[constant]
        codes[constant] = np.random.RandomState(seed).randint(-128, 128, shape).astype(np.int8)
    tensors = [tb.T(list(a_shape), "int8", scale=a_q[0], zp=a_q[1], data=codes[0]),
               tb.T(list(b_shape), "int8", scale=b_q[0], zp=b_q[1], data=codes[1]),
               tb.T(list(out.shape), "int8", scale=out_q[0], zp=out_q[1])]
    otype, ofn = _opts("BatchMatMulOptions", AdjX=adj_x, AdjY=adj_y)
    inputs = [k for k in (0, 1) if k != constant]
    return tb.serialize(tensors, [(tb.BO.BATCH_MATMUL, otype, ofn, [0, 1], [2])], inputs, [2])


def operand_shapes(batch_a, batch_b, m: int, k: int, n: int, adj_x: bool, adj_y: bool):
    """(a_shape, b_shape) of an ``m x k`` by ``k x n`` product with batch dimensions
    ``batch_a`` and ``batch_b``, each stored transposed where its adj flag says."""
    return (tuple(batch_a) + ((k, m) if adj_x else (m, k)),
            tuple(batch_b) + ((n, k) if adj_y else (k, n)))


_q = st.tuples(st.floats(0.002, 0.2), st.integers(-128, 127))
_out_q = st.tuples(st.floats(0.05, 4.0), st.integers(-128, 127))


@st.composite
def broadcast_batches(draw):
    """Two batch shapes TFLite broadcasts: per dimension equal, or one of them 1; ranks may
    differ (the shorter aligned right)."""
    dims = draw(st.lists(st.integers(1, 3), max_size=2))
    a, b = [], []
    for d in dims:
        side = draw(st.sampled_from(("both", "a1", "b1")))
        a.append(1 if side == "a1" else d)
        b.append(1 if side == "b1" else d)
    drop = draw(st.integers(0, len(dims)))
    return (a[drop:], b) if draw(st.booleans()) else (a, b[drop:])


@settings(max_examples=10, deadline=None)
@given(batches=broadcast_batches(), mkn=st.tuples(*[st.integers(1, 9)] * 3),
       adj=st.tuples(st.booleans(), st.booleans()), a_q=_q, b_q=_q, out_q=_out_q,
       seed=st.integers(0, 99))
def test_the_llvm_hosts_integer_kernel_is_tflite_micros(batches, mkn, adj, a_q, b_q, out_q,
                                                       seed):
    a_shape, b_shape = operand_shapes(*batches, *mkn, *adj)
    cm = compiled_matches(bmm_model(a_shape, b_shape, *adj, a_q, b_q, out_q), "llvm", seed)
    assert set(cm.partition_summary) == {"llvm"}


@settings(max_examples=10, deadline=None)
@given(batches=broadcast_batches(), mkn=st.tuples(*[st.integers(1, 9)] * 3),
       adj=st.tuples(st.booleans(), st.booleans()), a_q=_q, b_q=_q, out_q=_out_q,
       seed=st.integers(0, 99))
def test_batch_matmul_is_on_the_npu_exactly(batches, mkn, adj, a_q, b_q, out_q, seed):
    a_shape, b_shape = operand_shapes(*batches, *mkn, *adj)
    cm = compiled_matches(bmm_model(a_shape, b_shape, *adj, a_q, b_q, out_q), "ethos-u", seed)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_products_past_int16_and_a_long_reduction_are_exact():
    """Zero points -128: each product ``(a - zp_a) * (b - zp_b)`` reaches 255 * 255, past
    what a 16-bit map holds; the 32-bit products' REDUCE_SUM over 300 of them."""
    data = bmm_model((1, 2, 3, 300), (1, 2, 300, 5), a_q=(0.05, -128), b_q=(0.03, -128),
                     out_q=(40.0, -100))
    cm = compiled_matches(data, "ethos-u", seed=4)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def _qop(a_shape, b_shape, adj, a_q, b_q, out_q, out_shape) -> QOp:
    return QOp(kind="batch_matmul", inputs=[], in_shapes=[tuple(a_shape), tuple(b_shape)],
               in_dtypes=["int8", "int8"], out_shape=tuple(out_shape), out_dtype="int8",
               in_q=[a_q, b_q], out_q=out_q, attrs={"adj_x": adj[0], "adj_y": adj[1]})


@settings(max_examples=6, deadline=None)
@given(batches=st.tuples(st.integers(1, 2), st.integers(2, 5)), m=st.integers(2, 7),
       k=st.integers(1, 9), n=st.integers(1, 6), adj=st.tuples(st.booleans(), st.booleans()),
       broadcast=st.sampled_from(("none", "b_one", "a_one", "a_rows", "b_outer")),
       cuts=st.tuples(st.integers(1, 4), st.integers(1, 6)), seed=st.integers(0, 99))
@example(batches=(2, 3), m=3, k=4, n=2, adj=(True, False), broadcast="a_rows", cuts=(2, 2),
         seed=0)
@example(batches=(2, 3), m=3, k=4, n=2, adj=(False, True), broadcast="b_outer", cuts=(3, 1),
         seed=1)
def test_a_stripe_is_the_same_operations_over_its_box(batches, m, k, n, adj, broadcast, cuts,
                                                      seed):
    """The output's rows (its second-to-last batch dimension) and columns (the matrices'
    rows) cut into boxes, each emitted alone over the whole operands (as a planner's stripes
    are), all of them together equal to TFLite Micro's output; an operand broadcast along
    its batches (one batch, or one along either batch dimension) is copied to every output
    batch first."""
    a_batch = {"a_one": (1, 1), "a_rows": (batches[0], 1)}.get(broadcast, batches)
    b_batch = {"b_one": (1, 1), "b_outer": (1, batches[1])}.get(broadcast, batches)
    a_shape, b_shape = operand_shapes(a_batch, b_batch, m, k, n, *adj)
    qs = ((0.05, 3), (0.03, -4), (0.2, 1))
    data = bmm_model(a_shape, b_shape, *adj, *qs)
    out_shape = (*batches, m, n)
    q = _qop(a_shape, b_shape, adj, *qs, out_shape)
    rs = np.random.RandomState(seed)
    a = rs.randint(-128, 128, a_shape).astype(np.int8)
    b = rs.randint(-128, 128, b_shape).astype(np.int8)
    (want,) = tflm_oracle(data, [a, b])

    api = vela_api()
    acc = api.NpuAccelerator.Ethos_U55_128
    at, bt, ot = 0, 1024, 2048
    work = 4096
    slots = [FmSlot(1, at, (1, 1, a.size), "int8", *qs[0]),
             FmSlot(1, bt, (1, 1, b.size), "int8", *qs[1])]
    ofm = FmSlot(1, ot, (1, 1, int(np.prod(out_shape))), "int8", *qs[2])
    em = Emission(Flash(), 0, lambda npu: block_config(npu, acc), work)
    rows = np.array_split(np.arange(batches[1]), min(cuts[0], batches[1]))
    cols = np.array_split(np.arange(m), min(cuts[1], m))
    ops = []
    for r in rows:
        for c in cols:
            ops += batch_matmul_ops(q, slots, ofm, em, ((int(r[0]), int(r[-1]) + 1),
                                                        (int(c[0]), int(c[-1]) + 1)))
    mem = Memory({0: 16, 1: work + work_bytes(q)})
    mem.regions[1][at:at + a.size] = a.reshape(-1).view(np.uint8)
    mem.regions[1][bt:bt + b.size] = b.reshape(-1).view(np.uint8)
    run_stream(api.npu_generate_register_command_stream(ops, acc), mem, "ethos-u55-128")
    got = mem.regions[1][ot:ot + want.size].view(np.int8).reshape(want.shape)
    assert np.array_equal(got, want), np.argwhere(got != want)[:5]


def test_a_5d_batch_matmul_stays_a_tflite_operator_naming_the_limit():
    """Vela 5.2 runs one on the NPU but folds only two batch dimensions into its rows, so its
    stream computes part of the output (test_vela_batch_matmul_stream below)."""
    data = bmm_model((2, 1, 2, 3, 4), (2, 1, 2, 4, 3))
    cm = compiled_matches(data, "ethos-u")
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "a 5-D BATCH_MATMUL; the NPU takes at most 4-D" in report, report


@pytest.mark.parametrize("a_shape,b_shape,adj", [
    ((1, 4, 4, 8), (1, 4, 8, 4), (False, False)),
    ((3, 7, 5), (3, 6, 7), (True, True)),
    ((3, 5, 7), (1, 7, 6), (False, False)),
    ((2, 1, 5, 7), (1, 3, 6, 7), (False, True)),
    ((4, 9), (9, 3), (False, False)),
], ids=["4d", "adj_both", "b_broadcast", "both_broadcast_adj_y", "2d"])
def test_vela_batch_matmul_stream_on_the_functional_model_is_tflite_micros(a_shape, b_shape,
                                                                          adj):
    """Vela 5.2's own stream for BATCH_MATMUL (its transposes, MULs into int32 and
    REDUCE_SUMs, broadcast batches copied), run on ``ethosu_stream``, equal to TFLite Micro
    with zero points that take the products past 16 bits."""
    data = bmm_model(a_shape, b_shape, *adj, a_q=(0.05, -128), b_q=(0.03, 100),
                     out_q=(3.0, -7))
    rs = np.random.RandomState(1)
    xs = [rs.randint(-128, 128, a_shape).astype(np.int8),
          rs.randint(-128, 128, b_shape).astype(np.int8)]
    (got,), _ = run_vela_model(vela_compile(data), xs, "ethos-u55-128")
    (want,) = tflm_oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)


def test_vela_batch_matmul_stream_of_5d_computes_only_its_first_batches():
    """Why a 5-D BATCH_MATMUL stays a TFLite operator: Vela 5.2 folds the two batch
    dimensions before the matrices into its rows and drops the first, so its stream writes
    the outputs of the first of the outer batches only (the functional model runs the stream
    as written; it is exact on every shape above)."""
    a_shape, b_shape = (2, 2, 3, 5, 7), (2, 2, 3, 7, 6)
    data = bmm_model(a_shape, b_shape)
    rs = np.random.RandomState(0)
    xs = [rs.randint(-128, 128, a_shape).astype(np.int8),
          rs.randint(-128, 128, b_shape).astype(np.int8)]
    (got,), _ = run_vela_model(vela_compile(data), xs, "ethos-u55-128")
    (want,) = tflm_oracle(data, xs)
    got = got.reshape(want.shape)
    assert np.array_equal(got[0], want[0])
    assert not np.array_equal(got[1], want[1])


def test_a_batch_matmul_quantized_per_channel_stays_a_tflite_operator_naming_the_rule():
    """TFLite's kernel reads one scale per tensor; the importer refuses the operator alone
    (``tflite_support.form_refusal``), so the tflite-micro host keeps it for TFLite Micro."""
    tensors = [tb.T([1, 3, 4], "int8", scale=0.05, zp=3),
               tb.T([1, 4, 2], "int8", scale=[0.03, 0.04], zp=[0, 0], axis=2),
               tb.T([1, 3, 2], "int8", scale=0.2, zp=1)]
    otype, ofn = _opts("BatchMatMulOptions", AdjX=False, AdjY=False)
    data = tb.serialize(tensors, [(tb.BO.BATCH_MATMUL, otype, ofn, [0, 1], [2])], [0, 1], [2])
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "not quantized per tensor" in placed.why, placed.why
    with pytest.raises(tvm_ethos.errors.TvmEthosError, match="BATCH_MATMUL"):
        tvm_ethos.load_model(data)


def _raw_model(a_shape, b_shape, out_shape) -> bytes:
    """A BATCH_MATMUL whose declared shapes need not agree."""
    tensors = [tb.T(list(a_shape), "int8", scale=0.05, zp=3),
               tb.T(list(b_shape), "int8", scale=0.03, zp=-4),
               tb.T(list(out_shape), "int8", scale=0.2, zp=1)]
    otype, ofn = _opts("BatchMatMulOptions", AdjX=False, AdjY=False)
    return tb.serialize(tensors, [(tb.BO.BATCH_MATMUL, otype, ofn, [0, 1], [2])], [0, 1], [2])


@pytest.mark.parametrize("a_shape,b_shape,out_shape,message", [
    ((1, 3, 4), (1, 5, 2), (1, 3, 2), "the first operand's columns must equal the second's rows"),
    ((2, 3, 4), (3, 4, 2), (2, 3, 2), "batch dimensions [2] and [3]: each pair must be equal"),
    ((4,), (4, 2), (2,), "BATCH_MATMUL of a 1-D operand; TFLite takes 2-D and above"),
    ((3, 4), (4, 2), (3, 5), "declared [3, 5], but the operator's inputs give [3, 2]"),
], ids=["reduced_lengths", "batches", "rank_1", "declared_output"])
def test_a_malformed_batch_matmul_is_one_line_naming_what_is_wrong(a_shape, b_shape,
                                                                   out_shape, message):
    with pytest.raises(tvm_ethos.errors.TvmEthosError) as err:
        tvm_ethos.load_model(_raw_model(a_shape, b_shape, out_shape))
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def _network(constant: bool = False) -> bytes:
    """ADD -> BATCH_MATMUL -> ADD on 4-D tensors of batch 1: the first operand of the product
    computed on the NPU, the second an input or (``constant``) constant codes, its output
    read by another NPU operator."""
    codes = np.random.RandomState(7).randint(-128, 128, (1, 6, 32, 20)).astype(np.int8)

    def t(shape, q):
        data = codes if constant and shape == (1, 6, 32, 20) else None
        return tb.T(list(shape), "int8", scale=q[0], zp=q[1], data=data)

    a, b, o = (1, 6, 24, 32), (1, 6, 32, 20), (1, 6, 24, 20)
    # the second ADD's operands share a scale: with scales 5x apart the NPU's ADD (Vela's
    # stream too) is a code off TFLite Micro's on a few elements, a matter of ADD alone
    tensors = [t(a, (0.05, 3)), t(a, (0.04, -2)), t(a, (0.07, 1)), t(b, (0.03, -4)),
               t(o, (0.5, 2)), t(o, (0.5, 5)), t(o, (0.8, -3))]
    add = _opts("AddOptions")
    bmm = _opts("BatchMatMulOptions", AdjX=False, AdjY=False)
    ops = [(tb.BO.ADD, *add, [0, 1], [2]), (tb.BO.BATCH_MATMUL, *bmm, [2, 3], [4]),
           (tb.BO.ADD, *add, [4, 5], [6])]
    return tb.serialize(tensors, ops, [0, 1, 5] if constant else [0, 1, 3, 5], [6])


@pytest.mark.parametrize("constant", [False, True], ids=["computed", "constant"])
@pytest.mark.parametrize("budget", [None, "smallest"])
def test_a_batch_matmul_between_npu_operators_is_planned_exactly(budget, constant):
    """The plan keeps the product a Plan of its own (its operands held whole: it is
    ``SOLITARY_OPS``), its neighbours planned around it; the file's outputs TFLite Micro's."""
    data = _network(constant)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, budget=budget)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, cm.placement
    rs = np.random.RandomState(3)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)


@st.composite
def constant_cases(draw):
    """(a shape, b shape, adj flags, the constant operand): any shapes and broadcast batches
    the computed cases take, one operand a constant."""
    batches = draw(broadcast_batches())
    mkn = draw(st.tuples(*[st.integers(1, 9)] * 3))
    adj = draw(st.tuples(st.booleans(), st.booleans()))
    return (*operand_shapes(*batches, *mkn, *adj), adj, draw(st.sampled_from((0, 1))))


@pytest.mark.parametrize("target", ["ethos-u", "llvm"])
@settings(max_examples=8, deadline=None)
@given(case=constant_cases(), a_q=_q, b_q=_q, out_q=_out_q, seed=st.integers(0, 99))
# each operand constant with its adj flag set and not: read in place from flash by the MUL
# (a; b with adj_y) or by the transposing copies
@example(case=((2, 3, 4), (4, 5), (False, False), 0), a_q=(0.05, 3), b_q=(0.03, -4),
         out_q=(0.2, 1), seed=1)
@example(case=((4, 3), (2, 2, 4, 5), (True, False), 0), a_q=(0.05, -128), b_q=(0.03, 9),
         out_q=(0.7, 1), seed=2)
@example(case=((2, 3, 4), (2, 4, 5), (False, False), 1), a_q=(0.05, 3), b_q=(0.03, -4),
         out_q=(0.2, 1), seed=3)
@example(case=((3, 2, 3, 4), (1, 5, 4), (False, True), 1), a_q=(0.01, 0), b_q=(0.03, 127),
         out_q=(0.1, -1), seed=4)
def test_a_batch_matmul_of_a_constant_is_tflite_micros(target, case, a_q, b_q, out_q, seed):
    """A constant first or second operand (Vela 5.2 runs either on the NPU): on the Ethos-U
    the stream reads its codes from flash; on the llvm host it is one more input of TFLite's
    integer kernel."""
    a_shape, b_shape, adj, constant = case
    data = bmm_model(a_shape, b_shape, *adj, a_q, b_q, out_q, constant=constant, seed=seed)
    cm = compiled_matches(data, target, seed)
    if target == "llvm":
        assert set(cm.partition_summary) == {"llvm"}
    else:
        (placed,) = cm.placement
        assert placed.placed_on == "ethos-u", placed.why


@pytest.mark.parametrize("a_shape,b_shape,adj,constant", [
    ((2, 4, 5), (5, 6), (False, False), 1),
    ((3, 7, 5), (1, 6, 7), (True, True), 1),
    ((4, 5), (2, 5, 6), (False, False), 0),
    ((5, 4), (3, 5, 6), (True, False), 0),
], ids=["b", "b_adj_both_broadcast", "a_broadcast", "a_adj_x"])
def test_vela_stream_of_a_constant_operand_on_the_functional_model_is_tflite_micros(
        a_shape, b_shape, adj, constant):
    """Vela 5.2's own stream of a BATCH_MATMUL by a constant (its MatMul copying the constant
    from flash into SRAM first), run on ``ethosu_stream``, equal to TFLite Micro."""
    data = bmm_model(a_shape, b_shape, *adj, a_q=(0.05, -128), b_q=(0.03, 100),
                     out_q=(3.0, -7), constant=constant, seed=2)
    rs = np.random.RandomState(1)
    shape = (a_shape, b_shape)[1 - constant]
    xs = [rs.randint(-128, 128, shape).astype(np.int8)]
    (got,), _ = run_vela_model(vela_compile(data), xs, "ethos-u55-128")
    (want,) = tflm_oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)


def _buffers(data: bytes) -> dict[str, bytes]:
    """The contents of the first subgraph's tensors in a .tflite, by name."""
    model = tflite.Model.GetRootAsModel(data, 0)
    graph = model.Subgraphs(0)
    out = {}
    for i in range(graph.TensorsLength()):
        t = graph.Tensors(i)
        raw = model.Buffers(t.Buffer()).DataAsNumpy()
        out[t.Name().decode()] = raw.tobytes() if hasattr(raw, "tobytes") else b""
    return out


@pytest.mark.parametrize("constant", [0, 1])
def test_a_batch_matmul_by_constant_codes_reads_them_from_flash(tmp_path, constant):
    """The constant's codes are in the Ethos-U operator's read-only (flash) tensor, once,
    not an input of the compiled model; the same model compiles to the same bytes."""
    data = bmm_model((2, 4, 5), (5, 6), constant=constant, seed=5)
    codes = np.random.RandomState(5).randint(-128, 128, ((2, 4, 5), (5, 6))[constant])
    cm = compiled_matches(data, "ethos-u")
    assert [tuple(t.shape) for t in cm.inputs] == [((2, 4, 5), (5, 6))[1 - constant]]
    files = []
    for k, compiled in enumerate((cm, tvm_ethos.compile(data, "ethos-u", cache_dir=False))):
        compiled.export_tflite(tmp_path / f"{k}.tflite")
        files.append((tmp_path / f"{k}.tflite").read_bytes())
    assert files[0] == files[1]
    flash = _buffers(files[0])["read_only"]
    assert flash.count(codes.astype(np.int8).tobytes()) == 1


def test_a_constant_quantized_per_channel_stays_a_tflite_operator_naming_the_rule():
    """TFLite's kernel reads one scale per operand, a constant's too."""
    rs = np.random.RandomState(0)
    tensors = [tb.T([2, 4, 5], "int8", scale=0.05, zp=3),
               tb.T([5, 3], "int8", scale=[0.03, 0.04, 0.05], zp=[0, 0, 0], axis=1,
                    data=rs.randint(-128, 128, (5, 3)).astype(np.int8)),
               tb.T([2, 4, 3], "int8", scale=0.2, zp=1)]
    otype, ofn = _opts("BatchMatMulOptions", AdjX=False, AdjY=False)
    data = tb.serialize(tensors, [(tb.BO.BATCH_MATMUL, otype, ofn, [0, 1], [2])], [0], [2])
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "not quantized per tensor" in placed.why, placed.why


def test_a_batch_matmul_of_two_constants_stays_a_tflite_operator_naming_the_rule():
    """A product of constants (TFLite's converter folds one) has no computed operand: the
    importer refuses it alone, TFLite Micro keeps it and the ADD that reads it."""
    rs = np.random.RandomState(0)
    tensors = [tb.T([2, 4, 5], "int8", scale=0.05, zp=3,
                    data=rs.randint(-128, 128, (2, 4, 5)).astype(np.int8)),
               tb.T([5, 6], "int8", scale=0.03, zp=-4,
                    data=rs.randint(-128, 128, (5, 6)).astype(np.int8)),
               tb.T([2, 4, 6], "int8", scale=0.2, zp=1),
               tb.T([2, 4, 6], "int8", scale=0.2, zp=1),
               tb.T([2, 4, 6], "int8", scale=0.3, zp=2)]
    bmm = _opts("BatchMatMulOptions", AdjX=False, AdjY=False)
    ops = [(tb.BO.BATCH_MATMUL, *bmm, [0, 1], [2]), (tb.BO.ADD, *_opts("AddOptions"), [2, 3], [4])]
    data = tb.serialize(tensors, ops, [3], [4])
    cm = compiled_matches(data, "ethos-u")
    assert cm.placement[0].placed_on == "tflite-micro"
    assert "BATCH_MATMUL of two constants" in cm.placement[0].why, cm.placement[0].why
    with pytest.raises(tvm_ethos.errors.TvmEthosError, match="BATCH_MATMUL of two constants"):
        tvm_ethos.load_model(data)
