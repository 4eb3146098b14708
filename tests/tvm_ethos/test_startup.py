"""What ``tvmc compile MODEL.tflite --target ethos-u`` loads (rfcs/0009, "The ``.tflite`` path
without TVM"): none of TVM, its FFI library or the TVM paths' modules, and a bounded number of
the project's modules; and the NPU codegens still register for whoever imports TVM, before or
after tvm_ethos (tvm_ethos/after_import.py)."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.models import model_path
from tvm_ethos.after_import import after_import
from tvm_ethos.cli import build_parser, named_command

#: the project's packages, whose modules the bound counts
PROJECT = ("tvm_ethos", "planner", "ethosu_stream", "ethos_arch")
#: the project modules a ResNet-8 .tflite -> .tflite compile imports (about 200), with room
#: for a few small ones; a change that puts a heavy subtree on the path (the compile driver, the
#: importers, the TE lowerings: tens of modules) goes past it
MAX_PROJECT_MODULES = 206
#: third-party packages the path must not load: TVM, its FFI library (the codegens register
#: only once it is loaded), and the other front doors' and hosts' libraries
NOT_LOADED = ("tvm", "tvm_ffi", "torch", "onnx", "onnxruntime", "tflite_micro",
              "ai_edge_litert", "pyopencl", "matplotlib", "dask")
#: project modules of the TVM paths (each imports TVM)
NOT_LOADED_PROJECT = ("tvm_ethos.byoc", "tvm_ethos.partition", "tvm_ethos.pipeline.driver",
                      "tvm_ethos.pipeline.codegen", "tvm_ethos.tflite_converter",
                      "tvm_ethos.compute.te_ops", "tvm_ethos.emulator.part_matchers")
#: modules only another subcommand needs (tvmc builds the parser of the one it runs), and
#: those of packages and of running a model, which tvm_ethos.compiler imports where used
NOT_LOADED_DEFERRED = ("tvm_ethos.cli_run", "tvm_ethos.tflite_run", "tvm_ethos.package",
                       "tvm_ethos.runtime.program", "tvm_ethos.runtime.executor")

_SCRIPT = textwrap.dedent("""
    import json, sys
    from importlib import metadata
    scans = []   # reads of every installed distribution's entry points (plugin backends)
    entry_points = metadata.entry_points
    metadata.entry_points = lambda *a, **k: scans.append(k) or entry_points(*a, **k)
    from tvm_ethos.cli import main
    status = main(["compile", sys.argv[1], "--target", "ethos-u", "--output-format", "tflite",
                   "-o", sys.argv[2], "-q", "--no-progress"])
    loaded, looked_for_plugins = sorted(sys.modules), len(scans)
    import tvm_ffi   # what import tvm loads first; the codegens register once it has loaded
    codegens = [bid for bid in ("ethos-u", "ethos-n")
                if tvm_ffi.get_global_func(f"relax.ext.{bid}", allow_missing=True) is not None]
    print(json.dumps({"status": status, "loaded": loaded, "codegens": codegens,
                      "scans": looked_for_plugins}))
""")


@pytest.fixture(scope="module")
def resnet8_compile(tmp_path_factory):
    """The modules loaded by ``tvmc compile resnet8_cifar.tflite --target ethos-u
    --output-format tflite`` in a fresh process, then the codegens that importing TVM's FFI
    library (as ``import tvm`` does first) finds registered there."""
    out = tmp_path_factory.mktemp("startup") / "out.tflite"
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(model_path("resnet8_cifar")),
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["status"] == 0 and out.stat().st_size > 1000
    return got


def test_a_tflite_compile_loads_no_tvm_nor_the_tvm_paths(resnet8_compile):
    loaded = resnet8_compile["loaded"]
    assert [m for m in loaded if m.split(".")[0] in NOT_LOADED] == []
    assert [m for m in NOT_LOADED_PROJECT if m in loaded] == []


def test_a_tflite_compile_loads_no_other_subcommand_nor_package_nor_executor(resnet8_compile):
    loaded = resnet8_compile["loaded"]
    assert "tvm_ethos.cli_compile" in loaded and "tvm_ethos.compiler" in loaded
    assert [m for m in NOT_LOADED_DEFERRED if m in loaded] == []


def test_a_tflite_compile_loads_a_bounded_number_of_project_modules(resnet8_compile):
    project = [m for m in resnet8_compile["loaded"] if m.split(".")[0] in PROJECT]
    assert "tvm_ethos.tflite_direct.group" in project   # the path it should take
    assert len(project) <= MAX_PROJECT_MODULES, (
        f"{len(project)} project modules on the .tflite path, at most {MAX_PROJECT_MODULES}: "
        "keep modules it does not call off it (rfcs/0009)")


def test_a_tflite_compile_for_built_in_targets_looks_for_no_plugin(resnet8_compile):
    assert resnet8_compile["scans"] == 0


def test_the_codegens_register_when_tvm_is_imported_after_tvm_ethos(resnet8_compile):
    assert resnet8_compile["codegens"] == ["ethos-u", "ethos-n"]


def test_after_import_runs_once_after_the_module_executes(tmp_path, monkeypatch):
    """Not loaded yet: called once, after the module's body ran (it sees the module); loaded
    already: called at once."""
    (tmp_path / "startup_probe_mod.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    after_import("startup_probe_mod", lambda: seen.append(sys.modules["startup_probe_mod"].VALUE))
    assert seen == []
    import startup_probe_mod  # noqa: F401

    assert seen == [7]
    importlib.reload(sys.modules["startup_probe_mod"])
    assert seen == [7]   # once
    after_import("startup_probe_mod", lambda: seen.append("now"))
    assert seen == [7, "now"]
    monkeypatch.delitem(sys.modules, "startup_probe_mod")


_TOP_OPTIONS = st.sampled_from(["-v", "--verbose", "-vv"])
_COMMAND_LINES = st.sampled_from([
    ["compile", "m.tflite", "--target", "ethos-u", "-o", "out.tflite", "-q"],
    ["compile", "m.tflite", "--target", "ethos-u,llvm", "--budget", "300KiB", "-v"],
    ["plan", "m.tflite", "--target", "ethos-u", "--jobs", "1", "--no-vela"],
    ["run", "m.tar", "--no-progress"],
])


@settings(max_examples=25, deadline=None)
@given(st.lists(_TOP_OPTIONS, max_size=2), _COMMAND_LINES)
def test_the_parser_of_the_named_subcommand_parses_as_the_whole_parser(options, line):
    """tvmc builds only the parser of the subcommand its command line names: what that
    parser reads is what the parser of every subcommand reads."""
    argv = options + line
    assert named_command(argv) == line[0]
    assert (vars(build_parser(named_command(argv)).parse_known_args(argv)[0])
            == vars(build_parser().parse_known_args(argv)[0]))
