"""One line and exit status 2 for every bad path and argument of tvmc, before any work
(issue 25, item 6).

Each case of the issue (``-o ""``, ``-o /proc/a.tar``, ``-o /dev/full``, ``--planner-report``
and ``--output-format tflite`` to unwritable paths, ``tvmc run --outputs`` likewise,
``--seed -1``, ``tvmc compile /dev/zero``) runs through ``tvmc``'s ``main`` with the
compiler and the package loader replaced by functions that fail the test: the error must come
from the checks, before anything is compiled or loaded.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import stat

import numpy as np
import pytest
import tflite_builder as tb

import tvm_ethos
from tvm_ethos.cli import main
from tvm_ethos.cli_paths import (
    CliError,
    check_int_range,
    require_distinct,
    require_file,
    require_writable,
    write_failed,
)

TARGET = "ethos-u,llvm"


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv + ["--no-progress"])
    return rc, out.getvalue(), err.getvalue()


def one_line(rc: int, err: str, *words: str) -> str:
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def no_work(monkeypatch):
    """Compiling, importing or loading anything fails the test."""
    def forbidden(*_a, **_k):
        raise AssertionError("work started before the arguments were checked")
    for name in ("load_model", "compile", "load"):
        monkeypatch.setattr(tvm_ethos, name, forbidden)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("model") / "conv.tflite"
    path.write_bytes(tb.conv2d(np.random.RandomState(0)))
    return str(path)


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> str:
    """Any existing file: the checks of ``tvmc run`` come before the package is read."""
    path = tmp_path_factory.mktemp("pkg") / "m.tar"
    path.write_bytes(b"not read")
    return str(path)


def _compile(model, *argv):
    return call(["compile", model, "--target", TARGET, *argv])


@pytest.mark.parametrize("output,words", [
    ("", ["the package (-o) is an empty path", "give a file name"]),
    ("/proc/a.tar", ["'/proc/a.tar'", "cannot create a file in '/proc'"]),
    ("/dev/full", ["'/dev/full'", "a character device, not a regular file"]),
    ("/dev/null", ["'/dev/null'", "a character device"]),
    ("/", ["it is a folder"]),
    ("/nonexistent/dir/m.tar", ["folder '/nonexistent/dir' does not exist"]),
    ("/dev/null/m.tar", ["'/dev/null' is not a folder"]),
    ("sub/", ["the path names a folder"]),
])
def test_compile_output_paths(no_work, model, output, words):
    rc, out, err = _compile(model, "-o", output)
    one_line(rc, err, "tvmc compile: error:", *words)
    assert out == ""


def test_compile_planner_report_and_tflite_outputs(no_work, model, tmp_path):
    ok = str(tmp_path / "m.tar")
    for report, words in (("/proc/r.json", ["--planner-report '/proc/r.json'", "/proc"]),
                          ("/dev/full", ["--planner-report '/dev/full'", "character device"]),
                          (ok, ["--planner-report", "is the same file as the package (-o)"]),
                          (model, ["--planner-report", "the same file as the model file"])):
        rc, _, err = _compile(model, "-o", ok, "--planner-report", report)
        one_line(rc, err, *words)
    for output, words in (("/proc/x.tflite", ["the .tflite (-o) '/proc/x.tflite'"]),
                          (model, ["the .tflite (-o)", "the same file as the model file"])):
        rc, _, err = _compile(model, "-o", output, "--output-format", "tflite")
        one_line(rc, err, *words)
    # a bare name is a package: /dev/full is checked as one
    rc, _, err = _compile(model, "-o", "/dev/full")
    one_line(rc, err, "the package (-o) '/dev/full'", "character device")
    assert os.listdir(tmp_path) == []        # the probes leave nothing behind


@pytest.mark.parametrize("path,words", [
    ("/dev/zero", ["'/dev/zero' is a character device, not a regular file"]),
    ("", ["model file is an empty path"]),
    ("/", ["is a directory"]),
    ("/nonexistent.tflite", ["does not exist"]),
])
def test_compile_and_plan_model_paths(no_work, path, words):
    rc, _, err = call(["compile", path, "--target", TARGET])
    one_line(rc, err, "tvmc compile: error:", *words)
    rc, _, err = call(["plan", path, "--target", "ethos-u"])
    one_line(rc, err, "tvmc plan: error:", *words)


@pytest.mark.parametrize("argv,words", [
    (["--seed", "-1"], ["--seed must be from 0 to 4294967295, got -1"]),
    (["--seed", str(2**32)], ["--seed must be from 0 to 4294967295, got 4294967296"]),
    (["--outputs", "/proc/o.npz"], ["--outputs '/proc/o.npz'", "/proc"]),
    (["--outputs", "/dev/full"], ["--outputs '/dev/full'", "character device"]),
    (["--outputs", ""], ["--outputs is an empty path"]),
    (["--inputs", "/dev/zero"], ["--inputs file '/dev/zero' is a character device"]),
])
def test_run_arguments(no_work, package, argv, words):
    rc, out, err = call(["run", package, *argv])
    one_line(rc, err, "tvmc run: error:", *words)
    assert out == ""


def test_run_outputs_may_not_overwrite_the_package_or_inputs(no_work, package, tmp_path):
    rc, _, err = call(["run", package, "--outputs", package])
    one_line(rc, err, "--outputs", "the same file as the package")
    inputs = tmp_path / "in.npz"
    np.savez(inputs, np.zeros(3, np.int8))
    rc, _, err = call(["run", package, "--inputs", str(inputs), "--outputs", str(inputs)])
    one_line(rc, err, "--outputs", "the same file as --inputs file")


def test_run_package_path(no_work):
    rc, _, err = call(["run", "/dev/zero"])
    one_line(rc, err, "package '/dev/zero' is a character device")


def test_plan_sweep_files_checked_before_sweeping(no_work, model, tmp_path, monkeypatch):
    from planner import sweep

    def forbidden(*_a, **_k):
        raise AssertionError("swept before the output folder was checked")
    monkeypatch.setattr(sweep, "run_sweep", forbidden)
    (tmp_path / "points.csv").mkdir()
    rc, _, err = call(["plan", model, "--target", "ethos-u", "--sweep-budget", "1KiB:1MiB:2",
                       "--output-dir", str(tmp_path), "--no-vela"])
    one_line(rc, err, "--output-dir's file", "points.csv", "it is a folder")


def test_a_write_that_fails_after_compiling_is_one_line(model, tmp_path, monkeypatch):
    """The disk fills up between the check and the write: one line, the partial file gone."""
    from tvm_ethos.compiler import CompiledModel

    out = tmp_path / "m.tar"

    def full(self, path, *_a, **_k):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(CompiledModel, "save", full)
    rc, _, err = _compile(model, "-o", str(out))
    one_line(rc, err, f"cannot write the package (-o) '{out}'", "No space left on device")
    assert not out.exists()


# ------------------------------------------------------------------- the checks themselves


def test_require_writable_leaves_an_existing_file_unchanged(tmp_path):
    p = tmp_path / "keep.bin"
    p.write_bytes(b"contents")
    before = os.stat(p)
    require_writable(str(p), "x")
    after = os.stat(p)
    assert p.read_bytes() == b"contents" and after.st_size == before.st_size
    assert sorted(os.listdir(tmp_path)) == ["keep.bin"]


def test_require_file_and_writable_on_special_files(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(CliError, match="is a named pipe, not a regular file"):
        require_file(str(fifo), "model file")
    with pytest.raises(CliError, match="it is a named pipe"):
        require_writable(str(fifo), "the package (-o)")
    with pytest.raises(CliError, match="NUL byte"):
        require_writable("a\0b", "the package (-o)")


def test_require_distinct_sees_through_links_and_dots(tmp_path):
    a = tmp_path / "a.tar"
    a.write_bytes(b"")
    (tmp_path / "b.tar").symlink_to(a)
    with pytest.raises(CliError, match="'.*b.tar' is the same file as the package"):
        require_distinct({"package": str(a), "--outputs": str(tmp_path / "b.tar")})
    with pytest.raises(CliError, match="same file as --planner-report"):
        require_distinct({"--planner-report": str(a),
                          "-o": os.path.join(str(tmp_path), ".", "a.tar")})
    require_distinct({"package": str(a), "--outputs": None, "--inputs": str(tmp_path / "c")})


def test_write_failed_names_the_path_and_removes_the_partial_file(tmp_path):
    p = tmp_path / "out.npz"
    p.write_bytes(b"half")
    e = write_failed(str(p), "--outputs", OSError(errno.ENOSPC, "No space left on device"))
    assert str(e) == f"cannot write --outputs '{p}': No space left on device"
    assert not p.exists()


def test_check_int_range():
    check_int_range(0, "--seed", 0, 10)
    check_int_range(10, "--seed", 0, 10)
    with pytest.raises(CliError, match="--seed must be from 0 to 10, got 11"):
        check_int_range(11, "--seed", 0, 10)
    with pytest.raises(CliError, match="--jobs must be >= 1, got 0"):
        check_int_range(0, "--jobs", 1)
