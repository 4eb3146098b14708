"""The ``tflite-micro`` host (tvm_ethos/backends/tflite_micro/): a .tflite partitioned on its
own graph, the Ethos-U's groups as ``ethos-u`` operators, every other operator copied as the
TFLite operator it was; the written file run as a board runs it, output for output equal to
TFLite Micro's interpreter on the source model. ``ethos-u`` alone means this host."""

import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli_compile import call

import tvm_ethos
from tests.helpers.models import model_path
from tests.helpers.tflite_oracle import inputs_for
from tvm_ethos import demo_person
from tvm_ethos.backends.tflite_micro import reference
from tvm_ethos.backends.tflite_micro.cut import npu_candidates
from tvm_ethos.backends.tflite_micro.reference import TflmReference
from tvm_ethos.demo_person import image_input, label, read_grey_bmp
from tvm_ethos.errors import TargetError
from tvm_ethos.reports.tflite_ops import operator_kinds
from tvm_ethos.targets import parse_targets

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

BO = tflite.BuiltinOperator


#: an operator TVM's importer does not convert quantized and Vela does not list either, so it
#: stays a TFLite operator whatever the NPU learns: TFLite Micro's int8 L2_NORMALIZATION
KEPT = "L2_NORMALIZATION"


def _l2_norm(x_index: int, out_index: int):
    return (BO.L2_NORMALIZATION, 0, None, [x_index], [out_index])


def _l2_output() -> tb.T:
    """TFLite's int8 L2_NORMALIZATION output quantization (scale 1/128, zero point 0)."""
    return tb.T([1, 6, 6, 8], "int8", scale=1 / 128, zp=0)


def _conv_kept_conv(rs):
    """CONV_2D, L2_NORMALIZATION (no importer converts it), CONV_2D."""
    x = tb._qact(rs, [1, 6, 6, 8])
    w, bias, y = tb._conv_tensors(rs, x, 8)
    t = _l2_output()
    w2, bias2, y2 = tb._conv_tensors(rs, t, 8)
    return tb.serialize([x, w, bias, y, t, w2, bias2, y2],
                        [tb._conv_op([0, 1, 2], [3]), _l2_norm(3, 4),
                         tb._conv_op([4, 5, 6], [7])], [0], [7])


def _diamond(rs):
    """a = CONV_2D(x); b = L2_NORMALIZATION(a); ADD(a, b): a and the ADD are joined by a
    tensor, yet one group of both would wait for its own result through b."""
    x = tb._qact(rs, [1, 6, 6, 8])
    w, bias, a = tb._conv_tensors(rs, x, 8)
    b = _l2_output()
    y = tb.T([1, 6, 6, 8], "int8", scale=0.2, zp=3)
    add = (BO.ADD, 0, None, [3, 4], [5])
    return tb.serialize([x, w, bias, a, b, y],
                        [tb._conv_op([0, 1, 2], [3]), _l2_norm(3, 4), add], [0], [5])


def _assert_equals_tflm(cm, source: bytes, runs: int, seed: int = 0, extra=()) -> None:
    """``cm.run`` against TFLite Micro on the source, input for input (one interpreter
    each, so state tensors evolve alike)."""
    ref = TflmReference(source)
    rs = np.random.RandomState(seed)
    for k, xs in enumerate([inputs_for(cm.inputs, rs) for _ in range(runs)] + list(extra)):
        got, want = cm.run(*xs), ref.run(xs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.size == w.size
            assert np.array_equal(g.reshape(w.shape).astype(np.int64), w.astype(np.int64)), \
                f"input {k}: {g.ravel()[:8]} vs TFLite Micro {w.ravel()[:8]}"


# ----------------------------------------------------------------------------- partition
def test_an_operator_no_importer_takes_stays_a_tflite_operator_between_ethos_u_ones():
    model = _conv_kept_conv(np.random.RandomState(0))
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert cm.targets == "ethos-u -accelerator_config=ethos-u55-128,tflite-micro"
    assert _kinds(cm.tflite) == ["ethos-u", KEPT, "ethos-u"]
    assert cm.partition_summary == {"ethos-u": 2, "tflite-micro": 1}
    kept = [p for p in cm.placement if p.placed_on == "tflite-micro"]
    assert [(p.index, p.kind) for p in kept] == [(1, KEPT)]
    assert "importer" in kept[0].why and KEPT in kept[0].why
    _assert_equals_tflm(cm, model, runs=4)


def test_groups_are_convex_so_no_ethos_u_operator_waits_for_itself():
    model = _diamond(np.random.RandomState(1))
    cm = tvm_ethos.compile(model, "ethos-u,tflite-micro", cache_dir=False)
    assert _kinds(cm.tflite) == ["ethos-u", KEPT, "ethos-u"]
    assert len({p.operator for p in cm.placement if p.placed_on == "ethos-u"}) == 2
    _assert_equals_tflm(cm, model, runs=3)


def _fake_graph(n: int, edges: list[tuple[int, int]]):
    """Operator i writes tensor i and reads the tensors of its predecessors."""
    reads = [[j for j, k in edges if k == i] for i in range(n)]
    return SimpleNamespace(kinds=["OP"] * n, reads=reads, writes=[[i] for i in range(n)])


@st.composite
def _dags(draw):
    n = draw(st.integers(1, 9))
    edges = [(j, i) for i in range(n) for j in range(i) if draw(st.booleans())]
    return n, edges, draw(st.lists(st.booleans(), min_size=n, max_size=n))


def _convex(ops, succ) -> bool:
    """Brute force over the graph (networkx): no operator outside ``ops`` is both reached
    from ``ops`` and reaches into it."""
    g = nx.DiGraph([(i, k) for i, ks in succ.items() for k in ks])
    g.add_nodes_from(succ)
    below = set().union(*(nx.descendants(g, i) for i in ops)) - set(ops)
    above = set().union(*(nx.ancestors(g, i) for i in ops)) - set(ops)
    return not (below & above)


@settings(max_examples=150, deadline=None)
@given(_dags())
def test_candidate_groups_are_convex_disjoint_maximal_and_cover_the_importable(dag):
    n, edges, importable = dag
    groups = npu_candidates(_fake_graph(n, edges), importable)
    members = [i for g in groups for i in g]
    assert sorted(members) == [i for i in range(n) if importable[i]]
    succ = {i: [k for j, k in edges if j == i] for i in range(n)}
    for g in groups:
        assert _convex(set(g), succ), f"a path leaves {g} and comes back"
    where = {i: set(g) for g in groups for i in g}
    for j, i in edges:   # neighbouring groups could not be one
        if importable[i] and importable[j] and where[i] != where[j]:
            assert not _convex(where[i] | where[j], succ)


def _kinds(data: bytes) -> list[str]:
    return [k for k, _ in operator_kinds(data)]


# ----------------------------------------------------------------------------- targets
def test_ethos_u_alone_means_the_tflite_micro_host():
    assert parse_targets("ethos-u").ids == ["ethos-u", "tflite-micro"]
    assert parse_targets("ethos-u -accelerator_config=ethos-u65-256").options_of(
        "ethos-u")["accelerator_config"] == "ethos-u65-256"
    with pytest.raises(TargetError, match="no host target at the end"):
        parse_targets("ethos-n")


def test_a_model_that_is_no_tflite_is_refused_by_the_tflite_micro_host():
    mod = tvm_ethos.load_model(tb.conv2d(np.random.RandomState(0)))
    bare = mod.without_attr("tvm_ethos.source_tflite_sha256")
    with pytest.raises(TargetError, match="compiles a .tflite model.*'ethos-u,llvm'"):
        tvm_ethos.compile(bare, "ethos-u", cache_dir=False)
    with pytest.raises(TargetError, match="one accelerator, ethos-u"):
        tvm_ethos.compile(tb.conv2d(np.random.RandomState(0)), "ethos-n,tflite-micro")


def test_load_model_keeps_the_source_for_the_host_and_for_export(tmp_path):
    model = tb.conv2d(np.random.RandomState(2))
    from_module = tvm_ethos.compile(tvm_ethos.load_model(model), "ethos-u", cache_dir=False)
    assert from_module.tflite == tvm_ethos.compile(model, "ethos-u", cache_dir=False).tflite
    # issue 27: an ethos-u,llvm model compiled from load_model's module exports without model=
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), "ethos-u,llvm", cache_dir=False)
    direct = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    assert Path(cm.export_tflite(tmp_path / "a.tflite")).read_bytes() == \
        Path(direct.export_tflite(tmp_path / "b.tflite")).read_bytes()


def test_the_same_model_gives_the_same_bytes_and_no_package(tmp_path):
    model = _conv_kept_conv(np.random.RandomState(3))
    a = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    b = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert a.tflite == b.tflite
    assert Path(a.export_tflite(tmp_path / "m.tflite")).read_bytes() == a.tflite
    with pytest.raises(TargetError, match="not a package: write it with export_tflite"):
        a.save(tmp_path / "m.zip")
    assert not (tmp_path / "m.zip").exists()


# ----------------------------------------------------------------------------- tvmc
@pytest.mark.parametrize("target,flags,python", [
    ("ethos-u", [], "ethos-u"),
    ("ethos-u -accelerator_config=ethos-u65-256", [], "ethos-u -accelerator_config=ethos-u65-256"),
    ("ethos-u", ["--target-ethos-u-accelerator_config=ethos-u55-256"],
     "ethos-u -accelerator_config=ethos-u55-256"),
], ids=["alone", "inline-option", "option-flag"])
def test_tvmc_compile_with_ethos_u_alone_writes_the_tflite(target, flags, python, tmp_path):
    model = _conv_kept_conv(np.random.RandomState(4))
    src, out = tmp_path / "m.tflite", tmp_path / "out.tflite"
    src.write_bytes(model)
    rc, stdout, err = call(["compile", str(src), "--target", target, "-o", str(out),
                            "--output-format", "tflite"] + flags)
    assert rc == 0, err
    assert "partition: ethos-u 2 operators, tflite-micro 1 operator" in stdout
    # Vela's summary reads the placement and the ethos-u operators' payloads
    assert "CPU operators = 1 (33.3%)" in stdout and "NPU operators = 2 (66.7%)" in stdout
    assert re.search(r"ethos-u operators: scratch [1-9][\d,]* B", stdout), stdout
    assert out.read_bytes() == tvm_ethos.compile(model, python, cache_dir=False).tflite


@pytest.mark.parametrize("out_name,args,match", [
    ("out.tar", ["--target", "ethos-u"], "tflite-micro host.*not a package: name the output "
                                         ".tflite"),
    ("out.tflite", ["--target", "llvm"], "has no ethos-u: use e.g. --target ethos-u$"),
], ids=["package-output", "no-ethos-u"])
def test_tvmc_what_the_host_cannot_do_is_one_line(out_name, args, match, tmp_path):
    src, out = tmp_path / "m.tflite", tmp_path / out_name
    src.write_bytes(tb.conv2d(np.random.RandomState(0)))
    rc, _stdout, err = call(["compile", str(src), "-o", str(out)] + args)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.search(match, lines[0]), err
    assert not out.exists()


def test_tvmc_ethos_u_without_an_output_name_writes_a_tflite(tmp_path, monkeypatch):
    src = tmp_path / "m.tflite"
    src.write_bytes(tb.conv2d(np.random.RandomState(0)))
    monkeypatch.chdir(tmp_path)
    rc, stdout, err = call(["compile", str(src), "--target", "ethos-u", "-q"])
    assert rc == 0, err
    assert stdout.strip() == "wrote module.tflite"
    assert not (tmp_path / "module.tar").exists()
    assert (tmp_path / "module.tflite").read_bytes() == \
        tvm_ethos.compile(src, "ethos-u", cache_dir=False).tflite


# ----------------------------------------------------------------------------- trained models
TRAINED = ["hello_world_int8", "micro_speech_quantized", "person_detect", "trained_lstm_int8",
           "keyword_scrambled_8bit"]
_CACHE: dict = {}


def _trained(name: str, accelerator: str):
    """The trained model compiled once per module (the compiled model, its source)."""
    if (name, accelerator) not in _CACHE:
        path = model_path(f"tflite-micro/{name}")
        source = path.read_bytes()
        cm = tvm_ethos.compile(source, f"ethos-u -accelerator_config={accelerator}",
                               cache_dir=False)
        _CACHE[name, accelerator] = (cm, source)
    return _CACHE[name, accelerator]


@pytest.fixture(scope="module", autouse=True)
def _forget_compiled():
    yield
    _CACHE.clear()


@pytest.mark.parametrize("accelerator", [
    "ethos-u55-128",
    pytest.param("ethos-u55-256", marks=pytest.mark.slow),
    pytest.param("ethos-u65-256", marks=pytest.mark.slow),
])
@pytest.mark.parametrize("name", TRAINED)
def test_a_trained_model_runs_as_tflite_micro_runs_it(name, accelerator):
    cm, source = _trained(name, accelerator)
    kept = {p.kind for p in cm.placement if p.placed_on == "tflite-micro"}
    if name in ("hello_world_int8", "person_detect", "trained_lstm_int8"):
        assert kept == set()   # wholly on the NPU, as Vela does (the LSTM: ops_lstm)
    if name == "keyword_scrambled_8bit":   # its SVDFs' states carried on the NPU (stream_svdf),
        assert kept == set()               # its int16 -> int32 QUANTIZE an int32 pool
    _assert_equals_tflm(cm, source, runs=3 if accelerator == "ethos-u55-128" else 20)


def test_person_detection_on_its_test_images():
    cm, source = _trained("person_detect", "ethos-u55-128")
    folder = model_path("tflite-micro/person_detect").parent
    xs = [image_input(str(folder / f), cm.inputs[0].shape)
          for f in ("person.bmp", "no_person.bmp")]
    got = [cm.run(x)[0] for x in xs]
    assert [label(g) for g in got] == ["person", "no person"]
    assert [g.ravel().tolist() for g in got] == [[-113, 113], [57, -57]]   # TFLite Micro's
    _assert_equals_tflm(cm, source, runs=0, extra=[[x] for x in xs])


def _bmp(pixels: np.ndarray, bottom_up: bool) -> bytes:
    """An uncompressed 8-bit BMP of ``pixels`` (rows top-down), grey palette."""
    h, w = pixels.shape
    stride = (w + 3) // 4 * 4
    rows = pixels[::-1] if bottom_up else pixels
    body = b"".join(bytes(r) + bytes(stride - w) for r in rows.astype(np.uint8))
    palette = b"".join(bytes([i, i, i, 0]) for i in range(256))
    offset = 14 + 40 + len(palette)
    head = b"BM" + (offset + len(body)).to_bytes(4, "little") + bytes(4) + \
        offset.to_bytes(4, "little")
    info = (40).to_bytes(4, "little") + w.to_bytes(4, "little", signed=True) + \
        (h if bottom_up else -h).to_bytes(4, "little", signed=True) + (1).to_bytes(2, "little") + \
        (8).to_bytes(2, "little") + bytes(4) + len(body).to_bytes(4, "little") + bytes(16)
    return head + info + palette + body


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.booleans(), st.integers(0, 2**31 - 1))
def test_a_grey_bmp_reads_top_down_whatever_its_row_order_and_padding(h, w, bottom_up, seed):
    pixels = np.random.RandomState(seed).randint(0, 256, size=(h, w)).astype(np.uint8)
    with tempfile.NamedTemporaryFile(suffix=".bmp") as f:
        f.write(_bmp(pixels, bottom_up))
        f.flush()
        assert np.array_equal(read_grey_bmp(f.name), pixels)


def test_a_bmp_that_is_not_8_bit_grey_is_refused_by_name(tmp_path):
    data = bytearray(_bmp(np.zeros((2, 2), np.uint8), True))
    data[28:30] = (24).to_bytes(2, "little")
    (tmp_path / "c.bmp").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="a 24-bit BMP.*uncompressed 8-bit grey"):
        read_grey_bmp(str(tmp_path / "c.bmp"))
    (tmp_path / "t.bmp").write_bytes(bytes(data[:40]))
    with pytest.raises(ValueError, match="not a BMP"):
        read_grey_bmp(str(tmp_path / "t.bmp"))


def test_the_person_demo_check_can_fail(tmp_path, monkeypatch, capsys):
    """demo_person's check on the written file: true against TFLite Micro, false once the
    reference moves by one."""
    cm, _ = _trained("person_detect", "ethos-u55-128")
    model = model_path("tflite-micro/person_detect")
    images = [str(model.parent / f) for f in ("person.bmp", "no_person.bmp")]
    path = cm.export_tflite(tmp_path / "p.tflite")
    assert demo_person._detect(str(model), path, images, "ethos-u55-128")
    out = capsys.readouterr().out
    assert "person.bmp: person (scores [-113, 113]" in out
    assert "no_person.bmp: no person (scores [57, -57]" in out
    real = reference.TflmReference.run
    monkeypatch.setattr(reference.TflmReference, "run",
                        lambda self, xs: [o + np.int8(1) for o in real(self, xs)])
    assert not demo_person._detect(str(model), path, images, "ethos-u55-128")
    assert "DIFFERENT" in capsys.readouterr().out


def test_a_bad_option_is_refused_up_front_not_hidden_in_a_group():
    from tvm_ethos.errors import OptionError

    model = tb.conv2d(np.random.RandomState(0))
    with pytest.raises(OptionError, match="unknown option 'budgte'.*allowed options: "
                                          "accelerator_config, budget"):
        tvm_ethos.compile_tflite(model, "ethos-u", budgte="10KiB")
    with pytest.raises(OptionError, match="budget"):
        tvm_ethos.compile(model, "ethos-u", budget="lots")
    with pytest.raises(OptionError, match="accelerator_config.*allowed values"):
        tvm_ethos.compile(model, "ethos-u", accelerator_config="ethos-u99")


@pytest.mark.parametrize("name", TRAINED)
def test_operators_copied_from_a_trained_model_run_as_the_source_does(name):
    """Every operator of the model cut out and written again (as the kept ones are: options,
    state tensors, an LSTM's intermediates, nameless tensors) runs in TFLite Micro with the
    source's outputs, state carried over three inputs."""
    from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph, read_source
    from tvm_ethos.backends.tflite_micro.cut import cut_model

    source = model_path(f"tflite-micro/{name}").read_bytes()
    graph = SourceGraph(read_source(source))
    copy = cut_model(source, graph, range(len(graph.kinds)))
    assert _kinds(copy.data) == _kinds(source)
    a, b = TflmReference(copy.data), TflmReference(source)
    g = tflite.Model.GetRootAsModel(source, 0).Subgraphs(0)
    rs = np.random.RandomState(5)
    for _ in range(3):
        xs = []
        for t in g.InputsAsNumpy():
            ten = g.Tensors(int(t))
            dtype = {9: np.int8, 7: np.int16, 3: np.uint8}[ten.Type()]
            xs.append(rs.randint(np.iinfo(dtype).min, np.iinfo(dtype).max + 1,
                                 size=tuple(ten.ShapeAsNumpy())).astype(dtype))
        for got, want in zip(a.run(xs), b.run(xs)):
            assert np.array_equal(got, want)
