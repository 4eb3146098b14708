"""What a TFLite user expects of a compiled model: TFLite's output names and shapes, inputs by
name, and a loaded package that keeps both."""
import os
import re

import numpy as np
import pytest
from conftest import model_path, oracle, random_inputs
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    with pytest.raises(
        tvm_ethos.TvmEthosError, match=r"unknown input name\(s\) 'nope'.* inputs are '"
    ):
        cm.run({name: xs[0], "nope": xs[0]})
    with pytest.raises(tvm_ethos.TvmEthosError, match=rf"no array for input\(s\) '{name}'"):
        cm.run({})


# ------------------------------------------------------------------- options, version, logging
def _small_model():
    import tflite_builder as tb

    return tb.conv2d(np.random.RandomState(5), kernel=(3, 3))


def test_compile_docstring_names_every_option():
    from tvm_ethos.backends.registry import get_registry
    from tvm_ethos.compiler import COMPILE_OPTIONS

    reg = get_registry()
    builtin = ("ethos-n", "ethos-u", "opencl", "llvm")
    names = set(COMPILE_OPTIONS) | {k for b in builtin for k in reg.get(b).options_schema()}
    missing = [n for n in sorted(names) if f"``{n}``" not in tvm_ethos.compile.__doc__]
    assert missing == []


@pytest.mark.parametrize("options, unknown", [({"budgett": "20KiB"}, "'budgett'"),
                                              ({"tops": 4}, "'tops'"),   # ethos-n's, not ethos-u's
                                              ({"cache": "/tmp/x", "plan": True}, "'cache'")])
def test_unknown_compile_option_lists_the_allowed_ones(options, unknown):
    from tvm_ethos.compiler import COMPILE_OPTIONS

    with pytest.raises(tvm_ethos.OptionError) as err:
        tvm_ethos.compile(_small_model(), target="ethos-u,llvm", **options)
    msg = str(err.value)
    hint = {"'budgett'": " (did you mean 'budget'?)",
            "'cache'": " (did you mean 'cache_dir'?)"}.get(unknown, "")
    assert msg.startswith(f"unknown option {unknown}{hint}; allowed options: ")
    assert "\n" not in msg
    assert all(o in msg for o in COMPILE_OPTIONS) and "ethos-u: accelerator_config" in msg


def test_version_license_and_py_typed(capsys):
    import os
    import re
    from distutils.core import run_setup
    from importlib.metadata import version
    from pathlib import Path

    from tvm_ethos.cli import main

    assert re.fullmatch(r"\d+\.\d+\.\d+", tvm_ethos.__version__)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"tvmc (tvm-ethos) {tvm_ethos.__version__}, apache-tvm {version('apache-tvm')}")
    root = Path(tvm_ethos.__file__).resolve().parents[1]
    cwd = os.getcwd()
    try:
        os.chdir(root)
        dist = run_setup(str(root / "setup.py"), stop_after="config")
    finally:
        os.chdir(cwd)
    assert dist.get_version() == tvm_ethos.__version__
    assert dist.get_license() == "Apache-2.0"
    for pkg in ("tvm_ethos", "planner"):
        assert "py.typed" in dist.package_data[pkg] and (root / pkg / "py.typed").is_file()


@pytest.mark.parametrize(
    "flags, shown, hidden",
    [
        ([], [], ["INFO", "DEBUG"]),
        (["-v"], ["tvm_ethos.compiler: INFO: compiled for"], ["DEBUG"]),
        (["-vv"], ["INFO: compiled for", "DEBUG: partition:"], []),
    ],
)
def test_tvmc_verbose_turns_logging_on(tmp_path, capsys, flags, shown, hidden):
    from tvm_ethos.cli import main

    model = tmp_path / "m.tflite"
    model.write_bytes(_small_model())
    rc = main(
        [
            *flags,
            "compile",
            str(model),
            "--target",
            "ethos-u,llvm",
            "-o",
            str(tmp_path / "m.tar"),
            "--no-progress",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    assert all(s in err for s in shown) and not any(h in err for h in hidden), err
    # -v after the subcommand works too
    if flags == ["-v"]:
        assert main(["run", str(tmp_path / "m.tar"), "-v", "--no-progress"]) == 0
        assert "INFO: loading" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--pass-config"])
def test_old_tvmc_flags_get_one_line_saying_what_to_use(tmp_path, capsys, flag):
    from tvm_ethos.cli import OLD_TVMC_FLAGS, main

    model = tmp_path / "m.tflite"
    model.write_bytes(_small_model())
    assert (
        main(["compile", str(model), "--target", "ethos-u,llvm", f"{flag}=x", "--no-progress"]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tvmc compile: error: unrecognized arguments: {flag}=x; {flag} is TVM's old "
                   f"tvmc flag: {OLD_TVMC_FLAGS[flag]}"]


# ------------------------------------------------------------------- issue 27: the API as shown


def test_run_takes_one_list_of_the_inputs(resnet8):
    path, cm = resnet8
    x = random_inputs(path, np.random.RandomState(8))[0]
    got = cm.run([x])
    assert [g.shape for g in got] == [s.shape for s in cm.outputs]
    assert np.array_equal(got[0], cm.run(x)[0]) and np.array_equal(got[0], oracle(path, [x])[0])
    assert np.array_equal(cm.start_async((x,)).wait()[0], got[0])
    with pytest.raises(tvm_ethos.TvmEthosError, match=r"shape \(1, 32, 32\), expected "
                       r"\(1, 32, 32, 3\)"):
        cm.run(x[..., 0])


def test_partition_for_names_every_option_it_takes():
    from tvm_ethos.compiler import PLANNING_OPTIONS

    mod = tvm_ethos.load_model(_small_model())
    with pytest.raises(tvm_ethos.OptionError) as err:
        tvm_ethos.partition_for_ethos_u(mod, budjet="300KiB")
    msg = str(err.value)
    assert msg.startswith("unknown option 'budjet' (did you mean 'budget'?); allowed options: ")
    assert all(o in msg for o in PLANNING_OPTIONS) and "(partition_for)" in msg
    assert "ethos-u: accelerator_config" in msg and "\n" not in msg


@given(st.integers(0, 10 ** 6), st.sampled_from([("kb", 1000), ("mb", 1000 ** 2),
                                                 ("KiB", 1024), ("MiB", 1024 ** 2), ("", 1)]),
       st.sampled_from([str.lower, str.upper, str]))
@settings(max_examples=80, deadline=None)
def test_sizes_follow_one_rule(n, unit, case):
    from planner.api import parse_size

    suffix, scale = unit
    assert parse_size(f"{n}{case(suffix)}") == n * scale


@pytest.mark.parametrize("bare", ["300k", "300K", "2m", "1G"])
def test_a_bare_k_m_or_g_is_refused_by_name(bare):
    from planner.api import parse_size
    from planner.errors import PlannerError

    with pytest.raises(PlannerError, match=r"says neither 1000 nor 1024; write \d+[KMG]iB "
                       r"\(x1024\) or \d+[kMG]B \(x1000\)"):
        parse_size(bare, "budget")
    with pytest.raises(tvm_ethos.OptionError, match="says neither 1000 nor 1024"):
        tvm_ethos.compile(_small_model(), target="ethos-u,llvm", budget=bare, cache_dir=False)


def _readme_snippet(marker: str) -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    return text.split(marker, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def _run_in_a_fresh_process(code: str, tmp_path):
    """``code`` in a new Python with the repository first on the path, from a folder laid out
    as the README assumes (the shipped models in ../shared/models)."""
    import subprocess
    import sys

    from tests.helpers.models import MODELS_DIR

    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "models").symlink_to(MODELS_DIR)
    env = dict(os.environ, PYTHONPATH=ROOT, TVM_ETHOS_CACHE_DIR="")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return repo, done.stdout


@pytest.mark.slow
def test_readme_first_snippet_runs_as_written(tmp_path):
    model_path("mobilenet_v1_0.25_96")   # skips where the models are not shipped
    repo, out = _run_in_a_fresh_process(_readme_snippet("**Compile and run**"), tmp_path)
    assert (repo / "model.tar").is_file() and out.startswith("partition for ethos-n")
    assert "network NPU peak" in out


@pytest.mark.slow
def test_readme_tvm_way_snippet_runs_as_written(tmp_path):
    model_path("resnet8_cifar")
    _run_in_a_fresh_process(_readme_snippet("**The TVM way**"), tmp_path)


def test_readme_activates_the_venv_before_the_first_tvmc():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    first_tvmc = re.search(r"^tvmc |^\s+tvmc ", text, re.M).start()
    assert 0 <= text.find("source .venv/bin/activate") < first_tvmc
