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
