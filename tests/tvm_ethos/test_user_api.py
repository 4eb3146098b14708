"""What a TFLite user expects of a compiled model: TFLite's output names and shapes, inputs by
name, and a loaded package that keeps both."""
import numpy as np
import pytest

import tvm_ethos
from conftest import model_path, oracle, random_inputs


@pytest.fixture(scope="module")
def resnet8():
    path = model_path("resnet8_cifar")
    return path, tvm_ethos.compile(tvm_ethos.load_model(path), target="ethos-n,opencl")


def _tflite_io(path):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    return it.get_input_details(), it.get_output_details()


def test_outputs_have_tflite_names_and_shapes(resnet8, tmp_path):
    path, cm = resnet8
    _, outs = _tflite_io(path)
    assert [(s.name, s.shape, s.dtype) for s in cm.outputs] == [
        (d["name"], tuple(int(v) for v in d["shape"]), np.dtype(d["dtype"]).name) for d in outs]
    assert cm.outputs[0].name == "StatefulPartitionedCall_1:0" and cm.outputs[0].shape == (1, 10)
    xs = random_inputs(path, np.random.RandomState(4))
    ref = oracle(path, xs)
    for got in (cm.run(*xs), cm.start_async(*xs).wait(), cm.run_vm(*xs),
                tvm_ethos.load(cm.save(tmp_path / "m.tar")).run(*xs)):
        assert [g.shape for g in got] == [r.shape for r in ref]
        assert all(np.array_equal(g, r) for g, r in zip(got, ref))
    assert tvm_ethos.load(tmp_path / "m.tar").outputs == cm.outputs


def test_run_takes_a_dict_by_input_name(resnet8):
    path, cm = resnet8
    name = cm.inputs[0].name
    xs = [random_inputs(path, np.random.RandomState(seed))[0] for seed in (5, 6)]
    by_name = [cm.run({name: x})[0] for x in xs]
    assert not np.array_equal(by_name[0], by_name[1])   # the dict's array is what runs
    for x, got in zip(xs, by_name):
        assert np.array_equal(got, cm.run(x)[0])
        assert np.array_equal(got, oracle(path, [x])[0])
    assert np.array_equal(cm.start_async({name: xs[1]}).wait()[0], by_name[1])
    with pytest.raises(tvm_ethos.TvmEthosError, match=r"unknown input name\(s\) 'nope'.* inputs are '"):
        cm.run({name: xs[0], "nope": xs[0]})
    with pytest.raises(tvm_ethos.TvmEthosError, match=rf"no array for input\(s\) '{name}'"):
        cm.run({})
