"""planner.io: exact round trips of the full form, the compact operator form, deterministic
output and errors that name the field and value."""
from __future__ import annotations

import copy
import dataclasses
import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import parts
from planner.devices import get_device
from planner.errors import PlannerError
from planner.graph import GraphBuilder, Part, PlannerGraph, Tensor
from planner.io import (
    COMPACT_OPS,
    dumps,
    graph_from_json,
    graph_to_json,
    load_graph,
    loads,
    save_graph,
)
from planner.propagator import Propagator
from planner.proposals import ProposalSearch
from planner.work_memory import WORK_ATTR, WorkMemory

DOC = Path(__file__).resolve().parents[2] / "docs" / "planner-graph-json.md"


def roundtrip(g: PlannerGraph) -> PlannerGraph:
    """Through real JSON text, as a file would go."""
    return graph_from_json(json.loads(json.dumps(graph_to_json(g))))


# ------------------------------------------------------------------------------------------
# random graphs from parts.py
# ------------------------------------------------------------------------------------------
small = st.integers(1, 3)
acts = st.sampled_from(parts.ACTIVATIONS)
ratios = st.sampled_from([1.0, 0.5, 0.37, 1 / 3])


@st.composite
def graphs(draw) -> PlannerGraph:
    b = GraphBuilder(draw(st.sampled_from(["graph", "g", "net-1", "ünï"])))
    shape = (1, draw(st.integers(2, 9)), draw(st.integers(2, 9)), draw(st.sampled_from([1, 2, 4])))
    pool = [b.input("x", shape, draw(st.sampled_from(["int8", "uint8", "int16"])))]
    if draw(st.booleans()):
        pool.append(b.input("y", shape))
    for i in range(draw(st.integers(0, 7))):
        x = draw(st.sampled_from(pool))
        four = len(x.shape) == 4
        name = f"p{i}"
        kind = draw(st.sampled_from(["conv", "dw", "pool", "mean", "elt", "const_elt", "unary",
                                     "concat", "reshape", "transpose", "resize", "pad", "slice",
                                     "opaque", "fc", "arg_max", "lstm", "worked"]))
        try:
            if kind == "conv" and four:
                c = x.shape[3]
                groups = draw(st.sampled_from([g for g in (1, 2, 4) if c % g == 0]))
                part = parts.conv2d(name, x, out_channels=groups * draw(small),
                                    kernel=(draw(small), draw(small)),
                                    strides=(draw(small), draw(small)),
                                    dilation=(draw(st.integers(1, 2)), 1),
                                    padding=tuple(draw(st.integers(0, 2)) for _ in range(4)),
                                    groups=groups, activation=draw(acts),
                                    weight_compression=draw(ratios), bias=draw(st.booleans()))
            elif kind == "dw" and four:
                part = parts.depthwise_conv2d(name, x, kernel=(draw(small), draw(small)),
                                              strides=(draw(small), 1),
                                              padding=draw(st.integers(0, 1)),
                                              depth_multiplier=draw(st.integers(1, 3)),
                                              activation=draw(acts),
                                              weight_compression=draw(ratios))
            elif kind == "pool" and four:
                part = parts.pool2d(name, x, draw(st.sampled_from(["max", "avg"])),
                                    pool_size=draw(small), strides=draw(small),
                                    padding=draw(st.integers(0, 1)))
            elif kind == "mean" and four:
                part = parts.mean(name, x, keepdims=draw(st.booleans()))
            elif kind == "elt":
                other = draw(st.sampled_from([t for t in pool if t.shape == x.shape]))
                part = parts.elementwise(name, x, other,
                                         draw(st.sampled_from(["add", "sub", "mul", "maximum",
                                                               "minimum"])), draw(acts))
            elif kind == "const_elt":
                cshape = draw(st.sampled_from([(x.shape[-1],), (1,), x.shape]))
                const = Tensor(f"{name}:c", cshape, draw(st.sampled_from(["int8", "int32"])),
                               True, draw(ratios))
                a, c = (const, x) if draw(st.booleans()) else (x, const)
                part = parts.elementwise(name, a, c, "mul")
            elif kind == "unary":
                part = parts.unary(name, x, draw(st.sampled_from(["relu", "sigmoid", "q"])))
            elif kind == "concat":
                same = [t for t in pool if len(t.shape) == len(x.shape)]
                ys = draw(st.lists(st.sampled_from(same), min_size=1, max_size=3))
                part = parts.concatenate(name, [x] + ys, axis=-1)
            elif kind == "reshape":
                part = parts.reshape(name, x, (1, x.elements))
            elif kind == "transpose":
                part = parts.transpose(name, x, draw(st.permutations(range(len(x.shape)))))
            elif kind == "resize" and four:
                part = parts.resize(name, x, (draw(small), draw(small)),
                                    draw(st.sampled_from(["nearest", "bilinear"])))
            elif kind == "pad":
                part = parts.pad(name, x, [(draw(st.integers(0, 1)), draw(st.integers(0, 2)))
                                           for _ in x.shape])
            elif kind == "slice":
                begin = [draw(st.integers(0, n - 1)) for n in x.shape]
                size = [draw(st.integers(1, n - b)) for n, b in zip(x.shape, begin)]
                part = parts.strided_slice(name, x, begin, size)
            elif kind == "opaque":
                part = parts.opaque(name, "custom", x, (2, 3), beta=draw(st.floats(-4, 4)),
                                    tag=draw(st.sampled_from([None, "s", True, 3])),
                                    nested=((1, 2), ("a", (None,))), frac=Fraction(2, 3))
            elif kind == "fc" and len(x.shape) == 2:
                part = parts.fully_connected(name, x, draw(small), draw(acts), draw(ratios),
                                             draw(st.booleans()))
            elif kind == "arg_max" and len(x.shape) >= 2:
                part = parts.arg_max(name, x)
            elif kind == "lstm" and four:
                # an LSTM reads a sequence: the map's rows as its time steps
                seq = b.add(parts.reshape(f"{name}:seq", x, x.shape[1:]))
                part = parts.lstm(name, seq, draw(small), time_major=draw(st.booleans()),
                                  weight_compression=draw(ratios))
            elif kind == "worked":
                # any Part may carry working memory of any form
                part = parts.opaque(name, "custom", x, x.shape, work=WorkMemory(
                    draw(st.integers(0, 99)), draw(st.integers(0, 9)), draw(st.integers(1, 32)),
                    draw(st.integers(0, 9))))
            else:
                continue
        except PlannerError:
            continue  # a window that does not fit: skip this operator
        pool.append(b.add(part))
    outputs = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique_by=id)) \
        if draw(st.booleans()) else None
    return b.build(outputs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_full_form_round_trip_is_exact(g):
    d = graph_to_json(g)
    back = roundtrip(g)
    assert back == g
    # Equality of the dataclasses covers propagators, attrs, dtypes and compression; check
    # the types that == would forgive (1 == 1.0 == True, Fraction(2) == 2).
    for p, q in zip(g.parts, back.parts):
        assert [(k, type(v)) for k, v in p.attrs] == [(k, type(v)) for k, v in q.attrs]
        for a, c in zip(p.propagators, q.propagators):
            assert [type(x) for r in a.transform for x in r] == \
                [type(x) for r in c.transform for x in r]
    assert graph_to_json(back) == d
    assert loads(dumps(g)) == g
    assert dumps(back) == dumps(g)


def test_every_part_with_working_memory_round_trips_and_plans_the_same():
    """An LSTM, an ARG_MAX (fixed working memory, stated by their constructors) and a Part
    with working memory per stripe element read back with their ``work`` a WorkMemory (not the
    tuple a JSON list reads back as), so the read graph plans exactly as the written one."""
    b = GraphBuilder("worked")
    x = b.input("x", (1, 6, 5, 4))
    relu = parts.unary("m", x, "relu")
    m = b.add(dataclasses.replace(relu, attrs=relu.attrs + ((WORK_ATTR,
                                                             WorkMemory(3, 2, 16, 5)),)))
    c = b.add(parts.conv2d("c", m, 4, kernel=3, padding=1))
    seq = b.add(parts.reshape("seq", c, (6, 5, 4)))
    y = b.add(parts.lstm("lstm", seq, 7))
    b.add(parts.arg_max("am", y))
    g = b.build()
    assert graph_to_json(g)["parts"][0]["attrs"]["work"] == \
        {"work_memory": {"fixed": 3, "per_element": 2, "align": 16, "per_position": 5}}
    back = loads(dumps(g))
    assert back == g
    for p, q in zip(g.parts, back.parts):
        assert type(q.attr(WORK_ATTR)) is type(p.attr(WORK_ATTR)), p.name
    assert {p.name for p in back.parts if isinstance(p.attr(WORK_ATTR), WorkMemory)} == \
        {"m", "lstm", "am"}
    device = get_device("ethos-u55-128")
    one, two = ProposalSearch(g, device, workers=1), ProposalSearch(back, device, workers=1)
    assert one.frontier == two.frontier
    plans = [two.proposal(k).to_json() for k in range(len(two.frontier))]
    assert [one.proposal(k).to_json() for k in range(len(one.frontier))] == plans
    held = {t["tensor"] for p in plans for plan in p["plans"] for t in plan["tensors"]}
    assert {"m:work", "lstm:work", "am:work"} <= held


def test_round_trip_keeps_fractions_and_order():
    b = GraphBuilder("t")
    x = b.input("x", (1, 4, 4, 4))
    y = b.add(parts.resize("r", x, (3, 2), "bilinear"))
    z = b.add(parts.conv2d("c", y, 8, kernel=3, groups=2, padding=1))
    g = b.build([z, y])
    d = graph_to_json(g)
    r = d["parts"][0]["propagators"][0]
    assert r["transform"][1] == [0, "1/3", 0, 0, "5/3"]
    assert r["offset"] == [0, "-1/3", "-1/4", 0]
    assert d["outputs"] == ["c:0", "r:0"]
    assert [t["name"] for t in d["tensors"]] == ["x", "r:0", "c:weights", "c:bias", "c:0"]
    assert roundtrip(g) == g


@pytest.mark.parametrize("stem", ["mobilenet_v1_1.0_224", "ds_cnn_kws", "resnet8_cifar"])
def test_shipped_models_round_trip_through_files(stem, tmp_path, models_dir):
    from planner.tflite import load_tflite
    path = models_dir / f"{stem}.tflite"
    if not path.exists():
        pytest.skip(f"{path} is not available")
    g = load_tflite(path, weight_compression=0.7)
    f = tmp_path / "g.json"
    save_graph(g, f)
    assert load_graph(f) == g
    first = f.read_bytes()
    save_graph(load_graph(f), f)
    assert f.read_bytes() == first


def test_output_is_deterministic_and_sorted():
    b = GraphBuilder("d")
    x = b.input("x", (1, 8, 8, 2))
    b.add(parts.conv2d("c", x, 4, kernel=3, padding=1, activation="relu"))
    g = b.build()
    text = dumps(g)
    assert text == dumps(b.build())
    assert json.loads(text) == graph_to_json(g)
    # Keys sorted at every level.
    def keys_sorted(v):
        if isinstance(v, dict):
            return list(v) == sorted(v) and all(keys_sorted(x) for x in v.values())
        if isinstance(v, list):
            return all(keys_sorted(x) for x in v)
        return True
    assert keys_sorted(json.loads(text, object_pairs_hook=dict))
    top = [m.group(1) for m in re.finditer(r'^  "(\w+)":', text, re.M)]
    assert top == sorted(top) == ["format", "inputs", "name", "outputs", "parts", "tensors",
                                  "version"]


# ------------------------------------------------------------------------------------------
# the compact form
# ------------------------------------------------------------------------------------------
def test_compact_form_calls_the_constructors():
    doc = {
        "name": "tiny",
        "inputs": [{"name": "x", "shape": [1, 32, 32, 3]}],
        "parts": [
            {"op": "conv2d", "name": "c1", "input": "x", "out_channels": 16, "kernel": [3, 3],
             "strides": [2, 2], "padding": "same", "activation": "relu6",
             "weight_compression": 0.5},
            {"op": "depthwise_conv2d", "name": "d1", "input": "c1", "padding": "same"},
            {"op": "add", "name": "a1", "inputs": ["d1", "c1:0"]},
            {"op": "mul", "name": "m1", "inputs": ["a1", {"shape": [16], "dtype": "int8"}]},
            {"op": "max_pool", "name": "p1", "input": "m1"},
            {"op": "mean", "name": "gap", "input": "p1", "keepdims": False},
            {"op": "fully_connected", "name": "fc", "input": "gap", "units": 10, "bias": False},
            {"op": "softmax", "name": "sm", "input": "fc", "output": "probs"},
        ],
    }
    g = graph_from_json(doc)
    b = GraphBuilder("tiny")
    x = b.input("x", (1, 32, 32, 3))
    c1 = b.add(parts.conv2d("c1", x, 16, kernel=(3, 3), strides=(2, 2), padding=(0, 0, 1, 1),
                            activation="relu6", weight_compression=0.5))
    d1 = b.add(parts.depthwise_conv2d("d1", c1, padding=(1, 1, 1, 1)))
    a1 = b.add(parts.elementwise("a1", d1, c1, "add"))
    m1 = b.add(parts.elementwise("m1", a1, Tensor("m1:const1", (16,), "int8", True), "mul"))
    p1 = b.add(parts.pool2d("p1", m1, "max", (2, 2), (2, 2)))
    gap = b.add(parts.mean("gap", p1, keepdims=False))
    fc = b.add(parts.fully_connected("fc", gap, 10, bias=False))
    b.add(parts.opaque("sm", "softmax", fc, fc.shape, output_name="probs", beta=1.0))
    assert g == b.build()
    assert g.outputs[0].name == "probs"
    assert roundtrip(g) == g


def test_compact_and_full_forms_mix():
    full = graph_to_json(graph_from_json({
        "inputs": [{"name": "x", "shape": [1, 4, 4, 2]}],
        "parts": [{"op": "relu", "name": "r", "input": "x"}]}))
    full["parts"].append({"op": "pad", "name": "p", "input": "r", "pads": [[0, 0], [1, 1],
                                                                          [1, 1], [0, 0]]})
    del full["outputs"]
    g = graph_from_json(full)
    assert [p.kind for p in g.parts] == ["unary", "pad"]
    assert g.outputs[0].shape == (1, 6, 6, 2)


def test_every_compact_op_builds():
    seen = set()
    base = {"inputs": [{"name": "x", "shape": [1, 8, 8, 4]}, {"name": "v", "shape": [2, 8]}]}
    cases = {
        "conv2d": {"input": "x", "out_channels": 4},
        "depthwise_conv2d": {"input": "x", "depth_multiplier": 2},
        "pool": {"input": "x", "pool_type": "avg", "pool_size": 3, "strides": 1,
                 "padding": "same"},
        "max_pool": {"input": "x"}, "avg_pool": {"input": "x"},
        "mean": {"input": "x"},
        "elementwise": {"inputs": ["x", "x"], "operation": "maximum"},
        "unary": {"input": "x", "operation": "exp"},
        "fully_connected": {"input": "v", "units": 3},
        "concatenate": {"inputs": ["x", "x"], "axis": 1},
        "reshape": {"input": "x", "shape": [1, 256]},
        "transpose": {"input": "x", "perm": [0, 2, 1, 3]},
        "resize": {"input": "x", "scale": [2, 3], "method": "bilinear"},
        "pad": {"input": "v", "pads": [[0, 0], [2, 1]]},
        "slice": {"input": "x", "begin": [0, 1, 2, 0], "size": [1, 2, 2, 4]},
        "strided_slice": {"input": "x", "begin": [0, 0, 0, 0], "size": [1, 8, 8, 2]},
        "softmax": {"input": "v", "beta": 0.5},
        "opaque": {"input": "x", "kind": "nms", "out_shape": [1, 10, 4],
                   "attrs": {"k": [1, 2], "f": {"fraction": "1/3"}}},
    }
    for op in COMPACT_OPS:
        fields = cases.get(op) or ({"inputs": ["x", "x"]} if op in (
            "add", "sub", "mul", "maximum", "minimum") else {"input": "x"})
        g = graph_from_json({**base, "parts": [{"op": op, "name": "n", **fields}]})
        seen.add(op)
        assert roundtrip(g) == g
        if op == "opaque":
            assert g.parts[0].attr("f") == Fraction(1, 3) and g.parts[0].attr("k") == (1, 2)
        if op == "pool":
            assert g.parts[0].output.shape == (1, 8, 8, 4)
        if op == "max_pool":  # strides default to the pool size
            assert g.parts[0].output.shape == (1, 4, 4, 4)
    assert seen == set(COMPACT_OPS)


def test_default_outputs_are_unconsumed_parts():
    g = graph_from_json({"inputs": [{"name": "x", "shape": [1, 4]}], "parts": [
        {"op": "relu", "name": "a", "input": "x"},
        {"op": "tanh", "name": "b", "input": "a"},
        {"op": "sigmoid", "name": "c", "input": "a"}]})
    assert [t.name for t in g.outputs] == ["b:0", "c:0"]


# ------------------------------------------------------------------------------------------
# errors name the field and the value
# ------------------------------------------------------------------------------------------
def _tiny() -> dict:
    b = GraphBuilder("e")
    x = b.input("x", (1, 4, 4, 2))
    b.add(parts.conv2d("c", x, 2, kernel=3, padding=1))
    return graph_to_json(b.build())


def _bad(mutate, match: str) -> None:
    d = copy.deepcopy(_tiny())
    mutate(d)
    with pytest.raises(PlannerError, match=match) as e:
        graph_from_json(d)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d.update(version=2), r"^version: expected 1 .*got 2"),
    (lambda d: d.update(format="onnx"), r"^format: .*got 'onnx'"),
    (lambda d: d.update(extra=1), r"unknown field 'extra'"),
    (lambda d: d.pop("parts"), r"missing field 'parts'"),
    (lambda d: d["tensors"][0].update(dtype="int7"), r"tensors\[0\]\.dtype: .*got 'int7'"),
    (lambda d: d["tensors"][0].update(shape=[1, 0, 4, 2]),
     r"tensors\[0\]\.shape\[1\]: expected an integer >= 1, got 0"),
    (lambda d: d["tensors"][1].update(compression=1.5),
     r"tensors\[1\]\.compression: expected a number in \(0, 1\], got 1\.5"),
    (lambda d: d["tensors"][1].update(constant="yes"),
     r"tensors\[1\]\.constant: expected true or false, got 'yes'"),
    (lambda d: d["parts"][0]["propagators"][0]["offset"].__setitem__(1, 0.5),
     r"parts\[0\] \('c'\)\.propagators\[0\]\.offset\[1\]: .*floats are not exact.*got 0\.5"),
    (lambda d: d["parts"][0]["propagators"][0]["transform"][1].__setitem__(1, "x/y"),
     r"propagators\[0\]\.transform\[1\]\[1\]: .*got 'x/y'"),
    (lambda d: d["parts"][0]["propagators"][0]["offset"].pop(),
     r"propagators\[0\]: propagator offset has 3 entries"),
    (lambda d: d["parts"][0].update(inputs=["x", "nope", "c:bias"]),
     r"parts\[0\] \('c'\)\.inputs\[1\]: not in the tensors table, got 'nope'"),
    (lambda d: d["parts"][0]["attrs"].update(kernel={"a": 1}),
     r"parts\[0\] \('c'\)\.attrs\.kernel: .*got \{'a': 1\}"),
    (lambda d: d["parts"][0]["attrs"].update(work=[240, 0, 1]),
     r"parts\[0\] \('c'\)\.attrs\.work: expected \{\"work_memory\": .*got \[240, 0, 1\]"),
    (lambda d: d["parts"][0]["attrs"].update(work_bytes=240),
     r"parts\[0\] \('c'\)\.attrs\.work_bytes: a Part's working memory is the attr \"work\": "
     r"write \{\"work_memory\": \{\"fixed\": BYTES\}\} there, got 240"),
    (lambda d: d["parts"][0]["attrs"].update(work={"work_memory": {"fixed": -1}}),
     r"attrs\.work\.work_memory\.fixed: expected an integer >= 0, got -1"),
    (lambda d: d["parts"][0]["attrs"].update(work={"work_memory": {"align": 0}}),
     r"attrs\.work\.work_memory\.align: expected an integer >= 1, got 0"),
    (lambda d: d["parts"][0]["attrs"].update(work={"work_memory": {"bytes": 4}}),
     r"attrs\.work\.work_memory: unknown field 'bytes'"),
    (lambda d: d["parts"][0].pop("kind"), r"parts\[0\]: missing field 'op' .* or 'kind'"),
    (lambda d: d.update(outputs=["ghost"]), r"outputs\[0\]: no tensor or earlier part .*'ghost'"),
    (lambda d: d["tensors"].append(dict(d["tensors"][0], shape=[2])),
     r"tensors\[4\]: tensor 'x' is already defined differently"),
])
def test_full_form_errors(mutate, match):
    _bad(mutate, match)


@pytest.mark.parametrize("part,match", [
    ({"op": "conv3d", "name": "n", "input": "x"}, r"parts\[0\] \(conv3d 'n'\)\.op: unknown "
     r"operator .*got 'conv3d'"),
    ({"op": "conv2d", "name": "n", "input": "x"}, r"missing field 'out_channels'"),
    ({"op": "conv2d", "name": "n", "input": "x", "out_channels": 4, "kernal": 3},
     r"unknown field 'kernal'"),
    ({"op": "conv2d", "name": "n", "input": "x", "out_channels": "4"},
     r"\.out_channels: expected an integer, got '4'"),
    ({"op": "conv2d", "name": "n", "input": "x", "out_channels": 4, "padding": "full"},
     r"\.padding: expected 'same', 'valid' or integers, got 'full'"),
    ({"op": "conv2d", "name": "n", "input": "x", "out_channels": 4, "kernel": [3, 3, 3]},
     r"\.kernel: expected 2 integers, got \[3, 3, 3\]"),
    ({"op": "conv2d", "name": "n", "input": "x", "out_channels": 4, "activation": "gelu"},
     r"\.activation: expected null or one of .*got 'gelu'"),
    ({"op": "conv2d", "name": "n", "input": "y", "out_channels": 4},
     r"\.input: no tensor or earlier part has this name, got 'y'"),
    ({"op": "conv2d", "name": "n", "input": "x", "out_channels": 4, "kernel": 9},
     r"parts\[0\] \('n'\): window of effective size 9 does not fit"),
    ({"op": "resize", "name": "n", "input": "x", "method": "cubic"},
     r"\.method: expected 'nearest' or 'bilinear', got 'cubic'"),
    ({"op": "add", "name": "n", "inputs": ["x"]}, r"\.inputs: expected two inputs, got \['x'\]"),
    ({"op": "relu", "input": "x"}, r"parts\[0\]: missing field 'name'"),
])
def test_compact_form_errors(part, match):
    d = {"inputs": [{"name": "x", "shape": [1, 4, 4, 2]}], "parts": [part]}
    with pytest.raises(PlannerError, match=match):
        graph_from_json(d)


def test_text_and_file_errors(tmp_path):
    with pytest.raises(PlannerError, match="invalid JSON at line 1 column 2"):
        loads("{nope")
    with pytest.raises(PlannerError, match=r"^graph: expected an object, got \[\]"):
        graph_from_json([])
    with pytest.raises(PlannerError, match="cannot read graph file"):
        load_graph(tmp_path / "missing.json")
    f = tmp_path / "bad.json"
    f.write_text('{"parts": [], "name": 3}')
    with pytest.raises(PlannerError, match=r"bad\.json: name: expected a string, got 3"):
        load_graph(f)


def test_unwritable_attrs_are_refused():
    b = GraphBuilder()
    x = b.input("x", (1, 4))
    for bad in (float("nan"), {"a": 1}, object()):
        g = PlannerGraph((Part("p", "k", (x,), Tensor("y", (1, 4)), (Propagator.identity(2),),
                               (("bad", bad),)),), (x,), (), "g")
        with pytest.raises(PlannerError, match=r"parts\[0\] \('p'\)\.attrs\.bad"):
            graph_to_json(g)


def test_documented_example_loads():
    """The example in docs/planner-graph-json.md stays valid and means what it says."""
    text = DOC.read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    assert blocks, "the doc has no json example"
    graphs_ = [graph_from_json(json.loads(b)) for b in blocks]
    compact, full = graphs_[0], graphs_[1]
    assert compact == full
    assert [p.kind for p in compact.parts] == ["conv2d", "depthwise_conv2d", "elementwise",
                                               "pool", "softmax"]
