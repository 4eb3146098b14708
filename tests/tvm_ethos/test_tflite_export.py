"""``CompiledModel.export_tflite`` / ``tvmc compile --output-format tflite``: the Ethos-U
subgraph written as one ``ethos-u`` custom operator in Vela's layout. The structure is
compared with Vela's own ``.tflite`` of the same model; the written file is run the way
Vela's is (ethosu_stream's reader and functional model), bit-exact with TFLite's reference
kernels on the source model; what cannot be written is refused by name."""

import re
import zlib
from pathlib import Path

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from graph_builder import Graph
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli_compile import call
from test_ops import CASES

import tvm_ethos
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.tflite_oracle import oracle, random_inputs
from tests.helpers.vela_cli import vela_compile
from tvm_ethos.errors import TargetError, UnsupportedModelError

pytest.importorskip("ethosu.vela")

UINT8 = tflite.TensorType.UINT8


def _residual(seed=5):
    """conv -> depthwise -> conv -> add with the input: several NPU operations, one subgraph."""
    g = Graph(np.random.RandomState(seed))
    x = g.input((1, 12, 12, 8))
    a = g.conv2d(x, 16, act="relu")
    b = g.conv2d(a, 16, kernel=(3, 3), depthwise=True)
    c = g.conv2d(b, 8, kernel=(1, 1), stride=(1, 1))
    return g.build([g.add(c, x, act="relu")])


def _two_inputs():
    """Two same-shaped inputs and two outputs whose order the subgraph's parameters do not
    share (the conv reads the second input first): a swap would go unnoticed by shapes."""
    g = Graph(np.random.RandomState(7))
    x = g.input((1, 8, 8, 8))
    x2 = g.input((1, 8, 8, 8))
    a = g.conv2d(x2, 8, act="relu")
    return g.build([g.add(x, a), a])


def _conv_on_both_sides():
    """A stride-4 convolution (no Ethos-U takes it: the host runs it) feeding a stride-1 one
    (the NPU's): one operator kind on both sides."""
    g = Graph(np.random.RandomState(3))
    x = g.input((1, 16, 16, 8))
    return g.build([g.conv2d(g.conv2d(x, 8, stride=(4, 4)), 8)])


def _compile(model, config="ethos-u55-128"):
    return tvm_ethos.compile(
        model, f"ethos-u -accelerator_config={config},llvm", cache_dir=False
    )


def _export(cm, tmp_path, name="out.tflite", **kw) -> bytes:
    return Path(cm.export_tflite(tmp_path / name, **kw)).read_bytes()


def _run_both(model, exported, config, runs=2, vary=True):
    """The exported file on the functional model against TFLite BUILTIN_REF on the source."""
    rs = np.random.RandomState(zlib.crc32(config.encode()))
    firsts = []
    for _ in range(runs):
        xs = random_inputs(model, rs)
        got, _stats = run_vela_model(exported, xs, config)
        ref = oracle(model, xs)
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g.reshape(r.shape), r)
        firsts.append(ref[0])
    if vary:
        assert not np.array_equal(firsts[0], firsts[1])  # the output follows the input


@pytest.fixture(scope="module")
def residual():
    return _residual()


def _ethos_u_op(data: bytes):
    """(model, subgraph, the one operator), checking it is an ethos-u custom operator."""
    m = tflite.Model.GetRootAsModel(data, 0)
    assert m.SubgraphsLength() == 1
    g = m.Subgraphs(0)
    assert g.OperatorsLength() == 1
    op = g.Operators(0)
    code = m.OperatorCodes(op.OpcodeIndex())
    assert code.CustomCode() == b"ethos-u"
    assert max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == tflite.BuiltinOperator.CUSTOM
    return m, g, op


def _quant(t):
    q = t.Quantization()
    return (q.ScaleAsNumpy().tolist(), q.ZeroPointAsNumpy().tolist())


@pytest.mark.parametrize("config", ["ethos-u55-128", "ethos-u65-256"])
def test_structure_matches_velas_own_file(residual, config, tmp_path):
    cm = _compile(residual, config)
    ours, vela = _export(cm, tmp_path), vela_compile(residual, config)
    _assert_structure_like_velas(cm, ours, vela, config)


@pytest.mark.parametrize("name", ["resnet8_cifar", "ds_cnn_kws", pytest.param(
    "mobilenet_v1_0.25_96", marks=pytest.mark.slow)])
def test_shipped_model_exports_like_velas_file(name, tmp_path):
    """A whole shipped model (SOFTMAX, and the MobileNet's MEAN and RESHAPE, included) as one
    ethos-u operator: Vela's structure, and bit-exact on the functional model with LiteRT on
    the source (ds_cnn_kws's and the MobileNet's random weights saturate their outputs to one
    value for every input; test_stream_models.py checks their intermediates through the same
    stream)."""
    from tests.helpers.models import model_path

    model = model_path(name).read_bytes()
    cm = _compile(model)
    ours = _export(cm, tmp_path)
    _assert_structure_like_velas(cm, ours, vela_compile(model, "ethos-u55-128"),
                                 "ethos-u55-128")
    _run_both(model, ours, "ethos-u55-128", vary=name == "resnet8_cifar")


def _assert_structure_like_velas(cm, ours: bytes, vela: bytes, config: str):
    (_, og, oop), (_, vg, vop) = _ethos_u_op(ours), _ethos_u_op(vela)
    assert oop.CustomOptionsAsNumpy().tobytes() == vop.CustomOptionsAsNumpy().tobytes()
    assert oop.CustomOptionsFormat() == vop.CustomOptionsFormat()
    o_in, v_in = oop.InputsAsNumpy().tolist(), vop.InputsAsNumpy().tolist()
    assert len(o_in) == len(v_in) and oop.OutputsLength() == vop.OutputsLength()
    # command stream, flash, scratch, scratch_fast: uint8 in both, then the same IFMs
    assert [og.Tensors(t).Type() for t in o_in] == [vg.Tensors(t).Type() for t in v_in]
    assert [og.Tensors(t).Type() for t in o_in[:4]] == [UINT8] * 4
    names = [og.Tensors(t).Name() for t in o_in[:3]]
    assert names == [vg.Tensors(t).Name() for t in v_in[:3]]
    # an Ethos-U55 has no fast scratch: the scratch is passed again; an Ethos-U65's is its own
    # tensor, the plan's SRAM, the scratch only the inputs and outputs (in both files)
    fast = config.startswith("ethos-u65")
    assert (o_in[3] != o_in[2]) == fast == (v_in[3] != v_in[2])
    if fast:
        assert og.Tensors(o_in[3]).Name() == vg.Tensors(v_in[3]).Name() == b"scratch_fast"
    ifm, ofm = og.Tensors(o_in[4]), og.Tensors(oop.Outputs(0))
    assert ifm.Name() == vg.Tensors(v_in[4]).Name() and _quant(ifm) == _quant(
        vg.Tensors(v_in[4])
    )
    assert _quant(ofm) == _quant(vg.Tensors(vop.Outputs(0)))
    # the arena offsets TFLite Micro pins (OfflineMemoryAllocation) are the stream's
    (payload,) = cm.program.payloads.values()
    (op,) = read_ethos_u_ops(ours)
    assert [s.arena_offset for s in op.inputs] == [a.offset for a in payload.inputs]
    assert [s.arena_offset for s in op.outputs] == [a.offset for a in payload.outputs]
    assert op.flash == payload.flash and op.scratch_bytes == payload.scratch_bytes
    # the driver wants the command stream on 16 bytes; the flash too, as Vela writes it
    for t in o_in[:2]:
        assert _data_offset(ours, og.Tensors(t).Buffer()) % 16 == 0


def _data_offset(data: bytes, buffer: int) -> int:
    """Where buffer ``buffer``'s bytes start in the file."""
    tab = tflite.Model.GetRootAsModel(data, 0).Buffers(buffer)._tab
    return tab.Vector(tab.Offset(4))


@pytest.mark.parametrize("config", ["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"])
def test_exported_file_is_bit_exact_with_tflite(residual, config, tmp_path):
    cm = _compile(residual, config)
    _run_both(residual, _export(cm, tmp_path), config)


def test_inputs_and_outputs_keep_the_source_order(tmp_path):
    model = _two_inputs()
    cm = _compile(model)
    (spec,) = cm.program.subgraphs
    assert spec.inputs != sorted(spec.inputs)  # the case this test is about
    data = _export(cm, tmp_path)
    src = tflite.Model.GetRootAsModel(model, 0).Subgraphs(0)
    _, g, _ = _ethos_u_op(data)
    for ours, theirs in ((g.InputsAsNumpy(), src.InputsAsNumpy()),
                         (g.OutputsAsNumpy(), src.OutputsAsNumpy())):
        assert [g.Tensors(t).Name() for t in ours] == [src.Tensors(t).Name() for t in theirs]
    _run_both(model, data, "ethos-u55-128")


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_operator_case_exports_bit_exact(case):
    model = CASES[case](np.random.RandomState(zlib.crc32(case.encode())))
    cm = _compile(model, "ethos-u65-256")
    from tvm_ethos.backends.ethos_u.tflite_export import export_tflite_bytes

    data = export_tflite_bytes(cm, model)
    xs = random_inputs(model, np.random.RandomState(1))
    got, _ = run_vela_model(data, xs, "ethos-u65-256")
    for g, r in zip(got, oracle(model, xs), strict=True):
        np.testing.assert_array_equal(g.reshape(r.shape), r)


def test_a_fast_scratch_is_its_own_tensor(residual, tmp_path):
    """An Ethos-U65 stream keeps its plan in the fast scratch: Vela's separate
    ``scratch_fast`` tensor of the plan's peak (pinned at 0, as Vela pins it), the scratch
    holding the input and output, and the file runs bit-exact."""
    cm = _compile(residual, "ethos-u65-256")
    ((sym, payload),) = cm.program.payloads.items()
    assert payload.fast_scratch_bytes == cm.plan_report["subgraphs"][sym]["peak_memory_bytes"]
    data = _export(cm, tmp_path)
    _, g, op = _ethos_u_op(data)
    ins = op.InputsAsNumpy().tolist()
    assert len(ins) == 5 and len(set(ins[:4])) == 4
    assert g.Tensors(ins[3]).Name() == b"scratch_fast"
    assert g.Tensors(ins[3]).ShapeAsNumpy().tolist() == [payload.fast_scratch_bytes]
    (eop,) = read_ethos_u_ops(data)
    assert eop.scratch_fast_bytes == payload.fast_scratch_bytes
    assert eop.scratch_bytes == payload.scratch_bytes == sum(
        -(-int(np.prod(a.shape)) // 16) * 16 for a in payload.inputs + payload.outputs)
    _run_both(residual, data, "ethos-u65-256")


@given(
    depthwise=st.booleans(),
    h=st.integers(3, 9),
    c=st.integers(2, 12),
    k=st.integers(1, 3),
    s=st.integers(1, 2),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=6, deadline=None)
def test_any_conv_geometry_exports_bit_exact(depthwise, h, c, k, s, seed):
    rs = np.random.RandomState(seed)
    model = tb.conv2d(rs, in_shape=(1, h, h + 1, c), cout=int(rs.randint(1, 17)),
                      kernel=(k, k), stride=(s, s), depthwise=depthwise)
    cm = _compile(model, "ethos-u55-256")
    from tvm_ethos.backends.ethos_u.tflite_export import export_tflite_bytes

    data = export_tflite_bytes(cm, model)
    xs = random_inputs(model, rs)
    got, _ = run_vela_model(data, xs, "ethos-u55-256")
    ref = oracle(model, xs)[0]
    np.testing.assert_array_equal(got[0].reshape(ref.shape), ref)


def test_export_is_deterministic(residual, tmp_path):
    cm = _compile(residual)
    first = _export(cm, tmp_path, "a.tflite")
    assert _export(cm, tmp_path, "b.tflite") == first
    assert _export(_compile(residual), tmp_path, "c.tflite") == first  # a fresh compile too


def test_a_model_from_the_cache_keeps_its_source(tmp_path):
    model = tb.conv2d(np.random.RandomState(3))
    first = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=tmp_path / "cache")
    again = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=tmp_path / "cache")
    assert again.from_cache
    assert _export(again, tmp_path, "b.tflite") == _export(first, tmp_path, "a.tflite")


def test_a_model_without_its_source_needs_it_passed(residual, tmp_path):
    # load_model's module keeps its source (test_tflite_micro_host.py); one without it
    mod = tvm_ethos.load_model(residual).without_attr("tvm_ethos.source_tflite_sha256")
    cm = tvm_ethos.compile(mod, "ethos-u,llvm", cache_dir=False)
    with pytest.raises(UnsupportedModelError, match=r"source \.tflite.*model="):
        cm.export_tflite(tmp_path / "x.tflite")
    assert not (tmp_path / "x.tflite").exists()
    # saved and loaded: the payload travels with the package, the source is passed again
    loaded = tvm_ethos.load(cm.save(tmp_path / "m.zip"))
    src = tmp_path / "m.tflite"
    src.write_bytes(residual)
    assert _export(loaded, tmp_path, model=src) == _export(_compile(residual), tmp_path)
    with pytest.raises(UnsupportedModelError, match=r"inputs \['t0', 't1'\] are not.*\['t0'\]"):
        loaded.export_tflite(tmp_path / "y.tflite", model=_two_inputs())


@pytest.mark.parametrize(
    "target,make,error,match",
    [
        ("llvm", lambda rs: tb.conv2d(rs), TargetError, "compiled for llvm.*ethos-u,llvm"),
        # an ADD broadcasting both operands: the NPU broadcasts the second one only
        ("ethos-u,llvm", lambda rs: tb.binary(rs, a_shape=(1, 1, 4, 8), b_shape=(1, 4, 1, 8)),
         UnsupportedModelError,
         "NPU subgraph tvm_ethos_ethos_u_sg0 has no command stream.*ADD"),
        ("ethos-u,llvm", lambda rs: tb.depth_to_space(), UnsupportedModelError,
         "no operator of the model runs on the Ethos-U .DEPTH_TO_SPACE run on the host"),
        ("ethos-u,llvm", lambda rs: _conv_on_both_sides(), UnsupportedModelError,
         "1 of the source's 2 CONV_2D operators run on the host and the rest on the Ethos-U"),
    ],
    ids=["no-ethos-u", "no-stream", "nothing-on-the-npu", "a-kind-on-both-sides"],
)
def test_what_cannot_be_written_is_refused_by_name(target, make, error, match, tmp_path):
    cm = tvm_ethos.compile(make(np.random.RandomState(0)), target, cache_dir=False)
    with pytest.raises(error, match=match):
        cm.export_tflite(tmp_path / "x.tflite")
    assert not (tmp_path / "x.tflite").exists()


def test_split_between_convolutions_is_one_ethos_u_operator_with_two_outputs(tmp_path):
    """A SPLIT's parts and the convolutions they feed are one subgraph (partition_siblings),
    written as one ethos-u operator with an output per branch, as Vela writes a SPLIT."""
    model = tb.split_convs(np.random.RandomState(0))
    exported = _export(_compile(model), tmp_path)
    _, _, op = _ethos_u_op(exported)
    assert op.OutputsLength() == 2
    _run_both(model, exported, "ethos-u55-128")


def test_tvmc_writes_the_tflite(residual, tmp_path):
    src, out = tmp_path / "m.tflite", tmp_path / "out.tflite"
    src.write_bytes(residual)
    rc, stdout, err = call(["compile", str(src), "--target", "ethos-u,llvm", "-o", str(out),
                            "--output-format", "tflite", "-q"])
    assert rc == 0, err
    assert stdout.strip() == f"wrote {out}"
    assert out.read_bytes() == _export(_compile(residual), tmp_path)


@pytest.mark.parametrize(
    "make,args,match",
    [
        (tb.conv2d, ["--target", "llvm"], "--target llvm has no ethos-u"),
        (tb.conv2d, ["--target", "ethos-u,llvm", "--output-format=mlf"], "invalid choice: 'mlf'"),
        (lambda rs: tb.binary(rs, a_shape=(1, 1, 4, 8), b_shape=(1, 4, 1, 8)),
         ["--target", "ethos-u,llvm"], "no command stream.*ADD"),
    ],
    ids=["no-ethos-u", "old-format", "refused-model"],
)
def test_tvmc_bad_combinations_are_one_line(make, args, match, tmp_path):
    src, out = tmp_path / "m.tflite", tmp_path / "out.tflite"
    src.write_bytes(make(np.random.RandomState(0)))
    fmt = [] if any(a.startswith("--output-format") for a in args) else ["--output-format",
                                                                           "tflite"]
    rc, _stdout, err = call(["compile", str(src), "-o", str(out)] + args + fmt)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.search(match, lines[0]), err
    assert not out.exists()


@pytest.mark.parametrize("config", ["ethos-u55-128", "ethos-u65-256"])
def test_host_operators_are_written_around_the_ethos_u_operators(config, tmp_path):
    """CONV_2D, a RESIZE_BILINEAR no NPU takes, CONV_2D: two ethos-u operators around the
    copied TFLite operator, laid out as Vela lays out the same model (one flash and one
    scratch tensor shared, each operator its own command stream), bit-exact on the
    functional model with TFLite's reference kernels for the resize, and written the same
    every time."""
    from ethosu_stream.tflite_graph import TfliteGraph

    model = tb.conv_resize_conv(np.random.RandomState(0))
    cm = _compile(model, config)
    ours = _export(cm, tmp_path)
    assert ours == _export(_compile(model, config), tmp_path, name="again.tflite")
    vela = vela_compile(model, config)
    shapes = []
    for data in (ours, vela):
        m = tflite.Model.GetRootAsModel(data, 0)
        g = m.Subgraphs(0)
        ops = [g.Operators(i) for i in range(g.OperatorsLength())]
        codes = [m.OperatorCodes(op.OpcodeIndex()) for op in ops]
        kinds = [c.CustomCode() or c.BuiltinCode() for c in codes]
        ins = [op.InputsAsNumpy().tolist() for op in ops]
        names = [[g.Tensors(t).Name() for t in i[:3]] for i in (ins[0], ins[2])]
        shapes.append((kinds, names, ins[0][1:3] == ins[2][1:3], ins[0][0] != ins[2][0],
                       [g.Tensors(t).ShapeAsNumpy().tolist() for t in ins[1]],
                       ops[1].BuiltinOptionsType()))
    assert shapes[0] == shapes[1]
    assert shapes[0][0] == [b"ethos-u", tflite.BuiltinOperator.RESIZE_BILINEAR, b"ethos-u"]
    graph = TfliteGraph(ours, config)
    assert graph.cpu_operators == ["RESIZE_BILINEAR (operator 1)"]
    _run_both(model, ours, config)
    # each stream's feature maps live in its own stretch of the one arena
    first, second = read_ethos_u_ops(ours)
    assert first.scratch_bytes == second.scratch_bytes
    end_first = max(s.arena_offset + int(np.prod(s.shape)) for s in first.inputs + first.outputs)
    assert min(s.arena_offset for s in second.inputs) >= end_first


@pytest.mark.slow
def test_mobilenet_224_exports_like_velas_file(tmp_path):
    """MobileNetV1-224 as one ethos-u operator: Vela's structure, and the file's stream
    computes what the compiled model's stream computes (test_stream_models.py checks that one
    against TFLite; the reference kernels abort on this model in this LiteRT build)."""
    from tests.helpers.models import model_path

    model = model_path("mobilenet_v1_1.0_224").read_bytes()
    cm = tvm_ethos.compile(model, "ethos-u -accelerator_config=ethos-u55-128,llvm",
                           cache_dir=False, npu_runtime="stream")
    ours = _export(cm, tmp_path)
    _assert_structure_like_velas(cm, ours, vela_compile(model, "ethos-u55-128"),
                                 "ethos-u55-128")
    x = np.random.RandomState(0).randint(-128, 128, (1, 224, 224, 3)).astype(np.int8)
    got, _ = run_vela_model(ours, [x], "ethos-u55-128")
    np.testing.assert_array_equal(got[0], cm.run(x)[0].reshape(got[0].shape))
