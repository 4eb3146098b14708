"""`tvmc compile` / `tvmc run` (tvm_ethos/cli_compile.py, cli_run.py) and the demo driver:
a compile + run round trip checked against the TFLite interpreter, the planner report, the
option mapping, --print-top / --print-time, one-line exit-2 errors for bad input, --help."""
import contextlib
import gc
import io
import json
import os
import re
import subprocess
import sys
import tarfile

import numpy as np
import pytest
from conftest import model_path, oracle, random_inputs
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.cli import SUBCOMMANDS, build_parser, collector_paused, freeze_at_exit, main
from tvm_ethos.cli_run import read_inputs, top_classes
from tvm_ethos.compiler import IOSpec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = "ethos-n,llvm"


def call(argv):
    """main(argv) -> (exit status, stdout, stderr), progress bars off."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv + ["--no-progress"] if argv and argv[0] in ("compile", "run") else argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def kws():
    return str(model_path("ds_cnn_kws"))


@pytest.fixture(scope="module")
def compiled(kws, tmp_path_factory):
    """ds_cnn_kws (the smallest model) compiled once, with options of every kind."""
    d = tmp_path_factory.mktemp("compiled")
    pkg, rep = str(d / "kws.tar"), str(d / "plan.json")
    rc, out, err = call(["compile", kws, "--target", TARGET, "-o", pkg,
                         "--planner-report", rep, "--target-ethos-n-tops=2",
                         "--budget", "64KiB", "--workspace-pools", "sram:1MiB:read_bw=8",
                         "--planner-max_plan_size=4", "--fallback-mode", "copy"])
    assert rc == 0, err
    assert err == ""
    return {"dir": d, "package": pkg, "report": rep, "stdout": out}


@pytest.fixture(scope="module")
def loaded(compiled):
    import tvm_ethos

    return tvm_ethos.load(compiled["package"])


def one_line_error(rc, err, command, *words):
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tvmc {command}: error: "), err
    for w in words:
        assert w in lines[0], (w, err)
    return lines[0]


# ----------------------------------------------------------------------------- compile


def test_compile_writes_a_tar_that_load_reads(compiled, loaded):
    with tarfile.open(compiled["package"]) as t:
        assert t.getnames() == ["manifest.json", "model.so", "meta.json", "program.json",
                                "constants.bin"]
    out = compiled["stdout"]
    assert f"compiled for {loaded.targets}" in out
    summary = ", ".join(f"{t} {n} operators" for t, n in loaded.partition_summary.items())
    assert f"partition: {summary}\n" in out
    assert loaded.partition_summary["ethos-n"] > 0
    assert loaded.plan_table in out and "casc part" in out
    assert out.rstrip().endswith(f"wrote {compiled['package']} and {compiled['report']}")


def test_target_and_planner_options_reach_the_compiler(compiled, loaded):
    assert "-tops=2" in loaded.targets
    rep = loaded.plan_report
    assert rep["devices"] == {"ethos-n": "ethos-n78-2tops"}
    assert rep["options"]["budget"] == 64 * 1024
    assert rep["options"]["memory_pools"] == {"sram": {"read_bytes_per_cycle": 8.0,
                                                       "size": 1024 * 1024}}
    assert rep["options"]["planner_options"]["max_plan_size"] == 4
    assert loaded.runtime_options == {"fallback_mode": "copy"}


def test_planner_report_json(compiled, loaded):
    with open(compiled["report"]) as f:
        rep = json.load(f)
    assert rep == loaded.plan_report
    subs = rep["subgraphs"]
    assert subs and rep["planned"]
    assert rep["peak_memory_bytes"] == max(s["peak_memory_bytes"] for s in subs.values())
    assert rep["peak_memory_bytes"] <= 64 * 1024
    assert rep["cycles"] == sum(s["cycles"] for s in subs.values())
    assert rep["cycles"] == sum(r["cycles"] for r in rep["layers"])
    for sym, s in subs.items():
        assert s["planned_bytes"] and s["planned_bytes"] == s["scheduled_bytes"], sym
        assert [r for r in rep["layers"] if r["subgraph"] == sym]
    assert {r["subgraph"] for r in rep["layers"]} == set(subs)
    # deterministic: sorted keys, so the same compile gives the same bytes
    with open(compiled["report"]) as f:
        assert f.read() == json.dumps(rep, indent=1, sort_keys=True) + "\n"


def test_host_only_and_quiet(kws, tmp_path):
    pkg = str(tmp_path / "m.tvmethos")
    rc, out, err = call(["compile", kws, "--target", "llvm", "-o", pkg, "--quiet"])
    assert rc == 0, err
    assert out == f"wrote {pkg}\n"
    assert not tarfile.is_tarfile(pkg)          # not a .tar name: the zip container
    rc, out, err = call(["compile", kws, "--target", "llvm", "-o", pkg])
    assert rc == 0, err
    assert "partition: llvm 12 operators\n\nno NPU subgraph: nothing to plan\n" in out
    rc, out, err = call(["run", pkg])
    assert rc == 0, err
    assert out.startswith("ran on llvm (no NPU subgraph)\n") and "emulated" not in out


# ----------------------------------------------------------------------------- run


def test_run_named_inputs_match_tflite(compiled, kws, loaded):
    d = compiled["dir"]
    xs = random_inputs(kws, np.random.RandomState(3))
    np.savez(d / "named.npz", **{s.name: x for s, x in zip(loaded.inputs, xs)})
    rc, out, err = call(["run", compiled["package"], "--inputs", str(d / "named.npz"),
                         "--outputs", str(d / "out.npz"), "--print-top", "4"])
    assert rc == 0 and err == "", err
    ref = oracle(kws, xs)
    with np.load(d / "out.npz") as f:
        assert f.files == ["output_0"]
        got = f["output_0"]
    assert np.array_equal(got.reshape(ref[0].shape), ref[0])
    assert "NPU subgraphs (ethos-n) were emulated" in out
    # --print-top: the four highest scores of the output, highest first
    tops = [(int(c), int(s)) for c, s in re.findall(r"top \d: class +(\d+) +score (-?\d+)", out)]
    flat = got.reshape(-1)
    assert len(tops) == 4
    assert [s for _, s in tops] == sorted(flat.tolist(), reverse=True)[:4]
    assert all(flat[c] == s for c, s in tops)


def test_run_positional_npy_and_fill_modes(compiled, kws):
    d = compiled["dir"]
    x = random_inputs(kws, np.random.RandomState(5))[0]
    np.save(d / "x.npy", x)
    rc, out, err = call(["run", compiled["package"], "--inputs", str(d / "x.npy"),
                         "--outputs", str(d / "pos.npz")])
    assert rc == 0, err
    with np.load(d / "pos.npz") as f:
        assert np.array_equal(f["output_0"].reshape(-1), oracle(kws, [x])[0].reshape(-1))
    rc, out, err = call(["run", compiled["package"], "--fill-mode", "zeros",
                         "--outputs", str(d / "zeros.npz"), "--print-time", "--repeat", "3"])
    assert rc == 0, err
    with np.load(d / "zeros.npz") as f:
        ref = oracle(kws, [np.zeros_like(x)])[0]
        assert np.array_equal(f["output_0"].reshape(-1), ref.reshape(-1))
    m = re.search(r"time \(ms, 3 runs .*\): mean ([\d.]+)  min ([\d.]+)  max ([\d.]+)", out)
    assert m, out
    mean, lo, hi = map(float, m.groups())
    assert 0 < lo <= mean <= hi


# ----------------------------------------------------------------------------- pure helpers

_names = st.lists(st.text("abcdefgh:_0123", min_size=1, max_size=6), min_size=1, max_size=3,
                  unique=True).filter(lambda ns: not any(re.fullmatch(r"arr_\d+", n)
                                                         for n in ns))


@settings(max_examples=40, deadline=None)
@given(names=_names, data=st.data())
def test_read_inputs_by_name_or_position(names, data, tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    specs = [IOSpec(n, tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))),
                    data.draw(st.sampled_from(["int8", "uint8", "float32"]))) for n in names]
    rs = np.random.RandomState(0)
    xs = [rs.randint(0, 100, size=s.shape).astype(s.dtype) for s in specs]
    np.savez(d / "named.npz", **{s.name: x for s, x in reversed(list(zip(specs, xs)))})
    np.savez(d / "pos.npz", *xs)
    for path in ("named.npz", "pos.npz"):
        got = read_inputs(str(d / path), specs, None, 0)
        assert all(np.array_equal(g, x) and g.dtype == x.dtype for g, x in zip(got, xs))
    # a missing input is an error unless --fill-mode fills it
    np.savez(d / "first.npz", **{specs[0].name: xs[0]})
    if len(specs) > 1:
        with pytest.raises(ValueError, match=f"no array for input {specs[1].name!r}"):
            read_inputs(str(d / "first.npz"), specs, None, 0)
        got = read_inputs(str(d / "first.npz"), specs, "ones", 0)
        assert np.array_equal(got[0], xs[0]) and all((g == 1).all() for g in got[1:])
    # the wrong shape or dtype is an error naming the input; nothing is cast
    bad = np.zeros(specs[0].shape + (2,), specs[0].dtype)
    np.savez(d / "bad.npz", **{specs[0].name: bad})
    with pytest.raises(ValueError, match=f"input {re.escape(repr(specs[0].name))} is"):
        read_inputs(str(d / "bad.npz"), specs, "zeros", 0)
    # filled inputs: the seed decides them
    a, b = read_inputs(None, specs, None, 7), read_inputs(None, specs, None, 7)
    assert all(np.array_equal(x, y) and x.shape == s.shape for x, y, s in zip(a, b, specs))


@given(st.lists(st.integers(-128, 127), min_size=1, max_size=40), st.integers(1, 50))
def test_top_classes_is_a_stable_descending_sort(values, n):
    got = top_classes(np.array(values, np.int8), n)
    brute = sorted(range(len(values)), key=lambda i: (-values[i], i))[:n]
    assert got == [(i, values[i]) for i in brute]


# ----------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def not_a_model(tmp_path_factory):
    p = tmp_path_factory.mktemp("bad") / "junk.tflite"
    p.write_bytes(b"this is not a flatbuffer")
    return str(p)


@pytest.mark.parametrize("argv, words", [
    (["--target", "ethos-x,llvm"], ["unknown target 'ethos-x'", "known targets"]),
    (["--target", "ethos-n"], ["no host target", "llvm"]),
    (["--target", "ethos-n,,llvm"], ["empty target name"]),
    (["--target", "ethos-n -tops,llvm"], ["cannot read option '-tops'"]),
    (["--target", TARGET, "--target-ethos-n-tops=3"], ["'tops'", "3", "1, 2, 4, 8"]),
    (["--target", TARGET, "--target-ethos-n-frobs=3"], ["unrecognized arguments",
                                                       "--target-ethos-n-frobs=3"]),
    (["--target", TARGET, "--target-ethos-u-accelerator_config=ethos-u55-64"],
     ["--target-ethos-u-accelerator_config", "not in --target"]),
    (["--target", TARGET, "--workspace-pools", "sram"], ["memory_pools", "name:size"]),
    (["--target", TARGET, "--workspace-pools", "sram:1MiB:speed=3"], ["unknown key 'speed'"]),
    (["--target", TARGET, "--workspace-pools", "flash2:1MiB"], ["no memory 'flash2'"]),
    (["--target", TARGET, "--workspace-pools", "sram:1MiB,"], ["empty pool"]),
    (["--target", TARGET, "--budget", "lots"], ["budget", "lots"]),
    (["--target", TARGET, "--planner-max_plan_size=0"], ["--planner-max_plan_size"]),
    (["--target", TARGET, "--planner-lockstep_rolling=sometimes"],
     ["--planner-lockstep_rolling", "'prologue'"]),
    (["--target", TARGET, "--planner-multi_dimensional=maybe"],
     ["--planner-multi_dimensional", "True or False"]),
    (["--target", TARGET, "--frobnicate"], ["unrecognized arguments: --frobnicate"]),
    (["--target", TARGET, "-o", "/nonexistent/dir/m.tar"], ["folder", "does not exist"]),
])
def test_compile_bad_options(kws, argv, words):
    rc, out, err = call(["compile", kws] + argv)
    one_line_error(rc, err, "compile", *words)
    assert out == ""


def test_compile_missing_and_non_model_files(not_a_model, tmp_path):
    rc, _, err = call(["compile", str(tmp_path / "nope.tflite"), "--target", TARGET])
    one_line_error(rc, err, "compile", "nope.tflite", "does not exist")
    rc, _, err = call(["compile", not_a_model, "--target", TARGET, "-o",
                       str(tmp_path / "m.tar")])
    one_line_error(rc, err, "compile", "junk.tflite", "not a TFLite flatbuffer")
    assert not os.path.exists(tmp_path / "m.tar")


def test_compile_impossible_budget_is_the_planners_message(kws, tmp_path):
    rc, _, err = call(["compile", kws, "--target", TARGET, "--budget", "1KiB",
                       "-o", str(tmp_path / "m.tar")])
    line = one_line_error(rc, err, "compile", "budget of 1024 bytes", "ethos-n")
    m = re.search(r"the smallest any Proposal needs is (\d+) bytes", line)
    assert m and int(m.group(1)) > 1024, line
    assert not os.path.exists(tmp_path / "m.tar")


def test_run_bad_input(compiled, not_a_model, tmp_path):
    pkg = compiled["package"]
    rc, _, err = call(["run", str(tmp_path / "none.tar")])
    one_line_error(rc, err, "run", "none.tar", "does not exist")
    rc, _, err = call(["run", not_a_model])
    one_line_error(rc, err, "run", "not a tvm-ethos compiled model")
    (tmp_path / "in.npz").write_text("not numpy")
    rc, _, err = call(["run", pkg, "--inputs", str(tmp_path / "in.npz")])
    one_line_error(rc, err, "run", "in.npz", "not a NumPy .npz")
    rc, _, err = call(["run", pkg, "--inputs", str(tmp_path / "absent.npz")])
    one_line_error(rc, err, "run", "absent.npz", "does not exist")
    np.savez(tmp_path / "shape.npz", np.zeros((1, 10, 49, 1), np.int8))
    rc, _, err = call(["run", pkg, "--inputs", str(tmp_path / "shape.npz")])
    one_line_error(rc, err, "run", "1x10x49x1 int8", "the model takes 1x49x10x1 int8")
    np.savez(tmp_path / "names.npz", image=np.zeros((1, 49, 10, 1), np.int8))
    rc, _, err = call(["run", pkg, "--inputs", str(tmp_path / "names.npz")])
    one_line_error(rc, err, "run", "'image'", "serving_default_input:0")
    rc, _, err = call(["run", pkg, "--print-top", "0"])
    one_line_error(rc, err, "run", "--print-top must be >= 1")


# ----------------------------------------------------------------------------- help


@pytest.mark.parametrize("command", ["compile", "run", "plan"])
def test_every_subcommand_has_help(command):
    assert command in SUBCOMMANDS or command in build_parser().format_help()
    rc, out, err = call([command, "--help"])
    assert rc == 0 and err == ""
    assert out.startswith(f"usage: tvmc {command} ")
    if command == "compile":   # generated from the backends' option schemas
        for flag in ("--target-ethos-n-variant", "--target-ethos-u-accelerator_config",
                     "--workspace-pools", "--planner-report", "--planner-max_plan_size"):
            assert flag in out
    if command == "run":
        for flag in ("--inputs", "--fill-mode", "--print-top", "--print-time", "--outputs"):
            assert flag in out


def test_compile_help_does_not_import_tvm():
    code = ("import sys\nfrom tvm_ethos.cli import main\n"
            "assert main(['compile', '--help']) == 0 and main(['run', '--help']) == 0\n"
            "assert 'tvm' not in sys.modules, 'tvm imported'\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert res.returncode == 0, res.stderr[-2000:]


def test_a_reader_that_leaves_early_ends_tvmc_quietly(tmp_path):
    """`tvmc compile ... | head -1`: the pipe closes before tvmc writes its report; it stops
    with a shell's SIGPIPE status and no traceback, the file written."""
    out = tmp_path / "m.tflite"
    argv = ["compile", str(model_path("tflite-micro/hello_world_int8")), "--target", "ethos-u",
            "-o", str(out), "--no-progress"]
    p = subprocess.Popen([sys.executable, "-c", "from tvm_ethos.cli import main; "
                          f"import sys; sys.exit(main({argv!r}))"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    p.stdout.close()   # before tvmc has imported enough to write anything
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 141 and "Traceback" not in err, err
    assert out.stat().st_size > 0


# ----------------------------------------------------------------------------- demo


def test_demo_compare_says_no_when_outputs_differ():
    from tvm_ethos.demo import compare

    ref = [np.array([[1, 2, 3]], np.int8)]
    assert compare([ref[0].copy()], ref) == ["output 0: bit-exact: yes (3 values)"]
    assert compare([np.array([[1, 2, 5]], np.int8)], ref) == [
        "output 0: bit-exact: no (1 of 3 values differ, by up to 2)"]
    assert "bit-exact: no" in compare([np.zeros((1, 4), np.int8)], ref)[0]


def test_demo_check_fails_when_an_output_is_perturbed(tmp_path):
    """The demo's check on ResNet-8, whose output follows its input: the interpreter's own
    outputs pass, the same outputs with one value moved by one fail (without TVM)."""
    from tvm_ethos import demo

    model = str(model_path("resnet8_cifar"))
    assert demo.output_follows_input(model, 0)
    inputs = demo.random_inputs(model, 0)
    ref = demo.tflite_reference(model, list(inputs.values()))
    out = tmp_path / "output.npz"
    np.savez(out, **{f"output_{i}": r for i, r in enumerate(ref)})
    assert demo.check_outputs(model, inputs, str(out)) == (
        True,
        ["output 0: bit-exact: yes (10 values)"],
    )
    bad = ref[0].copy()
    bad.flat[3] = bad.flat[3] + 1 if bad.flat[3] < 127 else bad.flat[3] - 1
    np.savez(out, output_0=bad)
    ok, lines = demo.check_outputs(model, inputs, str(out))
    assert not ok and lines == ["output 0: bit-exact: no (1 of 10 values differ, by up to 1)"]
    # the outputs of another input fail too: the check depends on the input
    other = demo.tflite_reference(model, list(demo.random_inputs(model, 1).values()))
    np.savez(out, output_0=other[0])
    assert not demo.check_outputs(model, inputs, str(out))[0]


def test_demo_ethos_u_check_runs_the_written_file_and_can_fail(tmp_path, monkeypatch):
    """Step 5: the .tflite tvmc writes for ethos-u runs on the functional model, bit-exact;
    the same file checked against outputs moved by one fails."""
    from tvm_ethos import demo

    model = str(model_path("resnet8_cifar"))
    path = str(tmp_path / "m.tflite")
    assert call(["compile", model, "--target", "ethos-u,llvm", "-o", path,
                 "--output-format", "tflite"])[0] == 0
    inputs = demo.random_inputs(model, 0)
    ok, lines = demo.check_ethos_u_tflite(model, path, inputs, "ethos-u55-128")
    assert ok and lines[1:] == ["output 0: bit-exact: yes (10 values)"]
    assert lines[0].startswith("m.tflite: ") and "NPU operations" in lines[0]
    real = demo.tflite_reference

    def moved(m, xs):
        out = real(m, xs)
        out[0].flat[2] = out[0].flat[2] + 1 if out[0].flat[2] < 127 else out[0].flat[2] - 1
        return out

    monkeypatch.setattr(demo, "tflite_reference", moved)
    ok, lines = demo.check_ethos_u_tflite(model, path, inputs, "ethos-u55-128")
    assert not ok and lines[1] == "output 0: bit-exact: no (1 of 10 values differ, by up to 1)"


def test_demo_refuses_a_model_whose_output_ignores_its_input(tmp_path, capsys):
    from tvm_ethos import demo

    mbn = str(model_path("mobilenet_v1_0.25_96"))
    assert not demo.output_follows_input(mbn, 0)
    assert demo.main([mbn, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "same output for two different inputs" in err and os.listdir(tmp_path) == []


@pytest.mark.slow
def test_demo_is_bit_exact_on_resnet8_with_an_opencl_fallback(tmp_path):
    from tvm_ethos import demo

    model = str(model_path("resnet8_cifar"))
    res = subprocess.run([sys.executable, "-m", "tvm_ethos.demo", model, "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = res.stdout
    partition = next(line for line in out.splitlines() if line.startswith("partition:"))
    assert "ethos-n" in partition and "opencl" in partition, partition   # a real fallback edge
    for text in ("casc part", "edges (fallback_mode=", "top 1: class", "emulated",
                 "output 0: bit-exact: yes", "wrote " + str(tmp_path / "model_ethos_u.tflite"),
                 "model_ethos_u.tflite: "):
        assert text in out, text
    # both checks passed: the package's and the Ethos-U file's
    assert out.count("output 0: bit-exact: yes") == 2
    # the package's own output, moved by one, fails the demo's check
    inputs = dict(np.load(tmp_path / "input.npz"))
    got = np.load(tmp_path / "output.npz")["output_0"].copy()
    got.flat[0] = got.flat[0] + 1 if got.flat[0] < 127 else got.flat[0] - 1
    np.savez(tmp_path / "output.npz", output_0=got)
    assert not demo.check_outputs(model, inputs, str(tmp_path / "output.npz"))[0]


@pytest.mark.parametrize("text, value", [("prologue", "prologue"), ("true", True),
                                         ("NO", False), ("1", True)])
def test_planner_word_and_bool_options(text, value):
    """lockstep_rolling takes a word besides True/False: the compile path's default
    "prologue" must be reachable from the command line, and booleans still parse."""
    import argparse

    from tvm_ethos.cli import add_planner_arguments, planner_options
    p = argparse.ArgumentParser()
    add_planner_arguments(p)
    args = p.parse_args([f"--planner-lockstep_rolling={text}"])
    assert planner_options(args) == {"lockstep_rolling": value}


def test_run_says_which_npu_model_ran_and_takes_npu_runtime(tmp_path):
    """An Ethos-U package runs its command stream on the functional model by default and
    says so; --npu-runtime tir runs the emulator instead; both match TFLite."""
    import tflite_builder as tb

    model = tb.conv2d(np.random.RandomState(0))
    src, pkg = tmp_path / "m.tflite", tmp_path / "m.tar"
    src.write_bytes(model)
    rc, _, err = call(["compile", str(src), "--target", "ethos-u,llvm", "-o", str(pkg)])
    assert rc == 0, err
    xs = random_inputs(model, np.random.RandomState(1))
    np.savez(tmp_path / "in.npz", *xs)
    outs = {}
    for runtime, says in ((None, "1 ran as Ethos-U command streams on the functional model"),
                          ("tir", "ran on the TensorIR emulator")):
        argv = ["run", str(pkg), "--inputs", str(tmp_path / "in.npz"),
                "--outputs", str(tmp_path / f"{runtime}.npz")]
        rc, out, err = call(argv + (["--npu-runtime", runtime] if runtime else []))
        assert rc == 0, err
        assert says in out
        with np.load(tmp_path / f"{runtime}.npz") as f:
            outs[runtime] = f["output_0"]
    want = oracle(model, xs)[0]
    for got in outs.values():
        assert np.array_equal(got.reshape(want.shape), want)
    rc, _, err = call(["run", str(pkg), "--npu-runtime", "vela"])
    assert rc == 2 and "--npu-runtime" in err


def test_tvmc_leaves_what_is_alive_at_exit_to_reference_counting():
    """main registers freeze_at_exit to run once at exit however often it runs (a process
    of its own shows it); that turns the collector off and freezes every object, so the
    interpreter's last collections skip them."""
    code = ("import tvm_ethos.cli as cli\n"
            "cli.freeze_at_exit = lambda: print('frozen at exit')\n"
            "for _ in range(3):\n"
            "    assert cli.main(['--version']) == 0\n"
            "print('main done')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert done.stdout.splitlines()[-2:] == ["main done", "frozen at exit"]
    enabled = gc.isenabled()
    try:
        freeze_at_exit()
        assert not gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_for_the_block_and_as_it_was_after(enabled):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.raises(ValueError), collector_paused():
            assert not gc.isenabled()
            raise ValueError("a compile that fails")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
