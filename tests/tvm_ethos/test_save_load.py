"""CompiledModel.save / tvm_ethos.load, in this process and in a fresh one; the executable is a
plain Relax VM executable."""
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import tvm
from conftest import model_path, oracle, random_inputs
from tvm import relax

import tvm_ethos

REPO = Path(__file__).resolve().parents[2]


def test_save_load_fresh_process(tmp_path):
    path = model_path("resnet8_cifar")
    cm = tvm_ethos.compile(tvm_ethos.load_model(path), target="ethos-n,llvm")
    xs = random_inputs(path, np.random.RandomState(11))
    ref = oracle(path, xs)[0]
    # the executable runs with a plain relax.VirtualMachine
    vm = relax.VirtualMachine(cm.executable, tvm.cpu())
    direct = vm["main"](tvm.runtime.tensor(xs[0])).numpy()
    assert np.array_equal(direct.reshape(ref.shape), ref)

    saved = cm.save(tmp_path / "resnet8.tvmethos")
    again = tvm_ethos.load(saved)
    assert again.partition_summary == cm.partition_summary
    assert np.array_equal(again.run(*xs)[0].reshape(ref.shape), ref)

    np.save(tmp_path / "x.npy", xs[0])
    script = textwrap.dedent(f"""
        import numpy as np, tvm_ethos
        cm = tvm_ethos.load({str(saved)!r})
        out = cm.run(np.load({str(tmp_path / 'x.npy')!r}))[0]
        np.save({str(tmp_path / 'out.npy')!r}, out)
        print(cm.partition_summary)
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = np.load(tmp_path / "out.npy")
    assert np.array_equal(out.reshape(ref.shape), ref)
    assert "ethos-n" in res.stdout


def test_load_rejects_other_files(tmp_path):
    import pytest

    p = tmp_path / "x.tvmethos"
    p.write_bytes(b"nope")
    with pytest.raises(tvm_ethos.ModelLoadError, match="not a tvm-ethos compiled model"):
        tvm_ethos.load(p)


def test_a_loaded_model_saves_the_same_bytes(tmp_path):
    """TVM cannot export a module loaded from a shared library: the package's library bytes
    are kept, so load + save gives the first file back, byte for byte (tar and zip)."""
    import tflite_builder as tb
    from conftest import assert_bit_exact

    model = tb.conv2d(np.random.RandomState(3), kernel=(3, 3))
    cm = tvm_ethos.compile(model, target="ethos-u,llvm")
    for name in ("m.tar", "m.tvmethos"):
        first = open(cm.save(tmp_path / name), "rb").read()
        loaded = tvm_ethos.load(tmp_path / name)
        again = open(loaded.save(tmp_path / ("again-" + name)), "rb").read()
        assert again == first
        assert (
            open(tvm_ethos.load(tmp_path / ("again-" + name)).save(tmp_path / name), "rb").read()
            == first
        )
    assert_bit_exact(loaded, model, n_inputs=1)


def test_every_field_written_is_read_back(tmp_path):
    """The schema takes whatever the compiler writes: an OpenCL program's kernels (a JSON text
    inside program.json), an Ethos-U command stream and a network of four subgraphs on three
    backends survive save + load unchanged, and the loaded model runs bit-exact."""
    import tflite_builder as tb
    from conftest import assert_bit_exact
    from graph_builder import Graph

    from tvm_ethos.package import read_package
    from tvm_ethos.runtime.program import NetworkProgram

    g = Graph(np.random.RandomState(7))
    c = g.conv2d(g.conv2d(g.conv2d(g.input((1, 8, 8, 4)), 4), 4, kernel=(9, 1)), 4)
    cases = [(tb.conv2d(np.random.RandomState(3), kernel=(3, 3)), target, {})
             for target in ("opencl", "ethos-u,llvm")]
    cases.append((g.build([g.pool("avg", c)]), "ethos-n,opencl", {"cpu_ops": "avg_pool2d"}))
    for model, target, options in cases:
        cm = tvm_ethos.compile(model, target=target, **options)
        path = cm.save(tmp_path / "m.tar")
        members = read_package(path)
        program = NetworkProgram.from_json(members["program.json"], members["constants.bin"])
        assert program.to_json().encode() == members["program.json"]
        assert program.constants_blob() == members["constants.bin"]
        loaded = tvm_ethos.load(path)
        assert (loaded.program.opencl is None) == ("opencl" not in target)
        assert [sg.backend for sg in loaded.program.subgraphs] == (
            ["ethos-n", "opencl", "ethos-n", "llvm"] if options else
            [sg.backend for sg in cm.program.subgraphs])
        assert sorted(loaded.program.payloads) == sorted(cm.program.payloads)
        assert_bit_exact(loaded, model, n_inputs=1)


def test_load_names_what_is_not_a_package(tmp_path):
    import pytest

    with pytest.raises(tvm_ethos.ModelLoadError, match="compiled model not found"):
        tvm_ethos.load(tmp_path / "missing.tar")
    with pytest.raises(tvm_ethos.ModelLoadError, match="not a regular file"):
        tvm_ethos.load(tmp_path)
