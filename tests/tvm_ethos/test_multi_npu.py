"""Several NPUs in one target list (``ethos-n,ethos-u,llvm``): each operator goes to the first
target that takes it, each NPU's subgraphs are planned for that NPU's device, and the whole
network runs bit-exact with TFLite's reference kernels."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from conftest import model_path, oracle, random_inputs

import tvm_ethos

TARGETS = ["ethos-n,ethos-u,llvm", "ethos-u,ethos-n,llvm"]
DEVICES = {"ethos-n": "ethos-n78-1tops", "ethos-u": "ethos-u55-128"}


def _assert_bit_exact_on_varying_outputs(cm, model, seed):
    """Bit-exact on two random inputs whose outputs differ (so that the check can fail)."""
    rs = np.random.RandomState(seed)
    outs = []
    for _ in range(2):
        xs = random_inputs(model, rs)
        got, ref = cm.run(*xs)[0], oracle(model, xs)[0]
        np.testing.assert_array_equal(got.reshape(ref.shape), ref)
        outs.append(got)
    assert not np.array_equal(*outs)


@pytest.fixture(scope="module")
def resnet8():
    return model_path("resnet8_cifar")


@pytest.fixture(scope="module")
def compiled(resnet8):
    return tvm_ethos.compile(tvm_ethos.load_model(resnet8), target="ethos-n,ethos-u,llvm")


@pytest.mark.parametrize("name", ["resnet8_cifar", "ds_cnn_kws", "mobilenet_v1_1.0_224"])
@pytest.mark.parametrize("target", TARGETS)
def test_each_operator_goes_to_the_first_target_that_takes_it(name, target):
    rep = tvm_ethos.partition_report(tvm_ethos.load_model(model_path(name)), target)
    order = target.split(",")
    for op in rep.operators:
        earlier = order[:order.index(op.placed_on)]
        assert all(op.rejections.get(t) for t in earlier), (op.op_id, op.placed_on, op.rejections)
        if op.via == "npu":
            assert op.subgraph.startswith(f"tvm_ethos_{op.placed_on.replace('-', '_')}_sg")


def test_two_npus_compile_bit_exact_and_plan_per_device(compiled, resnet8):
    assert compiled.partition_summary == {"ethos-n": 12, "ethos-u": 3}
    rep = compiled.plan_report
    assert rep["devices"] == DEVICES
    backends = {sub["backend"] for sub in rep["subgraphs"].values()}
    assert backends == {"ethos-n", "ethos-u"}
    for sub in rep["subgraphs"].values():
        assert sub["planned"] and sub["device"] == DEVICES[sub["backend"]]
    _assert_bit_exact_on_varying_outputs(compiled, resnet8, seed=4)


def test_npu_to_npu_edges_with_an_opencl_host():
    """conv 3x3 -> conv 9x3 (too tall for Ethos-N) -> conv 3x3: Ethos-N, Ethos-U, Ethos-N, with
    edges between the two NPUs both ways; outputs that follow the input."""
    from graph_builder import Graph

    g = Graph(np.random.RandomState(11))
    x = g.input((1, 12, 12, 4))
    y = g.conv2d(g.conv2d(g.conv2d(x, 8, act="relu"), 8, kernel=(9, 3), act="relu"), 6)
    model = g.build([y])
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-n,ethos-u,opencl")
    ops = cm.partition_report.operators
    assert [op.placed_on for op in ops] == ["ethos-n", "ethos-u", "ethos-n"]
    assert len({op.subgraph for op in ops}) == 3
    assert cm.plan_report["devices"] == DEVICES
    _assert_bit_exact_on_varying_outputs(cm, model, seed=8)


def test_two_npus_the_tvm_way(compiled, resnet8):
    """The same list through ``tvm_ethos.partition_for`` and a plain tvm.compile."""
    import tvm
    from tvm import relax

    pmod = tvm_ethos.partition_for(tvm_ethos.load_model(resnet8), "ethos-n,ethos-u,llvm")
    assert tvm_ethos.plan_report(pmod) == {k: v for k, v in compiled.plan_report.items()
                                           if k != "streams"}
    vm = relax.VirtualMachine(tvm.compile(pmod, target="llvm"), tvm.cpu())
    xs = random_inputs(resnet8, np.random.RandomState(5))
    got = vm["main"](tvm.runtime.tensor(xs[0])).numpy()
    np.testing.assert_array_equal(got, compiled.run(*xs)[0])


def test_cli_compile_two_npus(tmp_path, resnet8):
    from tvm_ethos.cli import main

    out, err = io.StringIO(), io.StringIO()
    pkg = tmp_path / "m.tar"
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["compile", str(resnet8), "--target", "ethos-n,ethos-u,llvm", "-o", str(pkg),
                   "--no-progress"])
    assert rc == 0, err.getvalue()
    text = out.getvalue()
    assert "ethos-n 12 operators, ethos-u 3 operators" in text
    assert "on ethos-n78-1tops" in text and "on ethos-u55-128" in text
    cm = tvm_ethos.load(pkg)
    xs = random_inputs(resnet8, np.random.RandomState(6))
    ref = oracle(resnet8, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)
