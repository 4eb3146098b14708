"""Every option of the API and the CLIs is validated up front, with a message that names the
option, the bad value and what is allowed (issue 8).

The tables walk the options themselves (each backend's schema, each PlannerOptions field), so
an option added later without validation, or without a bad value listed here, fails a test.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
from pathlib import Path

import pytest

import tvm_ethos
from planner.api import parse_size, plan
from planner.devices import get_device
from planner.errors import PlannerError
from planner.options import PlannerOptions
from planner.tflite import load_tflite
from tests.helpers.models import MODELS_DIR as MODELS
from tvm_ethos.errors import OptionError, TargetError

ROOT = Path(__file__).resolve().parents[2]
KWS = str(MODELS / "ds_cnn_kws.tflite")


def _registry():
    from tvm_ethos.backends.registry import get_registry
    return get_registry()


def _host_of():
    reg = _registry()
    return next(b for b in sorted(reg.ids()) if reg.get(b).capabilities().is_host)


# ------------------------------------------------------------------------ tvm_ethos.compile
class _Stranger:
    """A value of no type any option takes. Its repr is fixed, unlike a bare ``object()``'s
    (an address), so every process collects the same test ids: pytest-xdist refuses to run
    when its workers' collections differ."""

    def __repr__(self) -> str:
        return "<_Stranger>"


def _bad_values(spec):
    """Values every option of this schema entry must refuse."""
    bad = [True, None, _Stranger()]
    if spec.allowed is not None:
        sample = spec.allowed[0]
        bad += ["no-such-value", 12345] if isinstance(sample, str) else [3.5, -7, 99999, "x"]
    else:
        bad += [-1, "x", 2.5]
    return [v for v in bad if not _accepted(spec, v)]


def _accepted(spec, v) -> bool:
    if isinstance(v, bool) and not isinstance(spec.default, bool):
        return False
    if spec.allowed is not None:
        return v in spec.allowed and type(v) is type(spec.allowed[0])
    return spec.validator is not None and type(v) is type(spec.default) and spec.validator(v)


def _schema_cases():
    reg = _registry()
    host = _host_of()
    for bid in sorted(reg.ids()):
        backend = reg.get(bid)
        target = bid if backend.capabilities().is_host else f"{bid},{host}"
        for key, spec in sorted(backend.options_schema().items()):
            for value in _bad_values(spec):
                yield pytest.param(target, key, value, spec, id=f"{bid}-{key}-{value!r}"[:60])


@pytest.mark.parametrize("target,key,value,spec", list(_schema_cases()))
def test_every_backend_option_is_checked_before_any_work(target, key, value, spec):
    # the model bytes are junk: a check after loading would say so instead
    with pytest.raises(OptionError) as err:
        tvm_ethos.compile(b"junk, never read", target=target, **{key: value})
    msg = str(err.value)
    assert repr(key) in msg and repr(value)[:20] in msg, msg
    allowed = ", ".join(map(str, spec.allowed)) if spec.allowed is not None else spec.help
    assert allowed and allowed in msg, msg
    assert "\n" not in msg


def test_every_backend_option_has_bad_values():
    reg = _registry()
    for bid in reg.ids():
        for key, spec in reg.get(bid).options_schema().items():
            assert len(_bad_values(spec)) >= 3, (bid, key)
            # and the default itself is accepted
            tvm_ethos.parse_targets(bid if reg.get(bid).capabilities().is_host else
                                    f"{bid},{_host_of()}", {key: spec.default})


def test_text_values_are_read_like_inline_options():
    tl = tvm_ethos.parse_targets(f"ethos-n,{_host_of()}", {"tops": "4", "sram_size": "1024"})
    assert tl.options_of("ethos-n")["tops"] == 4
    assert tl.options_of("ethos-n")["sram_size"] == 1024


@pytest.mark.parametrize("target,options,needle", [
    ("ethos-n -tops=2,llvm", {"tops": 4}, r"'tops'.*given twice.*-tops=2.*tops=4"),
    ("ethos-n,llvm", {"bogus": 1}, r"unknown option 'bogus'.*allowed options"),
    ("ethos-n -bogus=1,llvm", {}, r"unknown option 'bogus'.*allowed options: ple_ratio"),
    ("ethos-u -accelerator_config,llvm", {}, r"cannot read option '-accelerator_config'"),
])
def test_target_option_errors(target, options, needle):
    with pytest.raises((OptionError, TargetError), match=needle):
        tvm_ethos.compile(b"junk", target=target, **options)


@pytest.mark.parametrize("target", [5, None, ["ethos-x", "llvm"], "", "ethos-n", "llvm,llvm"])
def test_bad_targets(target):
    with pytest.raises(TargetError):
        tvm_ethos.compile(b"junk", target=target)


@pytest.mark.parametrize("shape_dict,needle", [
    ([1, 2], "bad value of type list"),
    ({"x": "abc"}, "bad shape 'abc' for input 'x'"),
    ({"x": (1, 0)}, r"bad shape \(1, 0\)"),
    ({"x": (1, True)}, r"bad shape \(1, True\)"),
    ({3: (1,)}, "key 3 is not an input name"),
])
def test_shape_dict_is_checked_before_loading(shape_dict, needle):
    with pytest.raises(OptionError, match=needle):
        tvm_ethos.load_model(b"junk, never read", shape_dict=shape_dict)


def test_shape_dict_names_a_real_input():
    if not os.path.exists(KWS):
        pytest.skip("ds_cnn_kws not available")
    with pytest.raises(OptionError, match="'nope' is no input.*'serving_default_input:0'"):
        tvm_ethos.load_model(KWS, shape_dict={"nope": (1, 49, 10, 1)})


# ------------------------------------------------------------------------ planner options
#: Bad values of every PlannerOptions field (a field missing here fails the next test).
BAD_PLANNER_OPTIONS = {
    "max_plan_size": [0, 257, True, 2.0, "4", None],
    "stripe_factors": [0, 65, False, 3.5, "x"],
    "max_width_tiles": [0, 65, True, None],
    "multi_dimensional": ["no", 1, None],
    "rolling_granules": [(-1,), (True,), (1.5,), 3, "10"],
    "weight_placements": [(), ("rom",), "flash", ("flash", 3), None],
    "allow_recompute": [0, "yes", None],
    "rolling_mixed": [0, "no", None],
    "lockstep_rolling": [1, "yes", None],
    "weight_prefetch": [0, "no", None],
    "thin_frontier": [1, 0, True, 2.5, "8"],
}


def test_every_planner_option_has_bad_values():
    assert sorted(BAD_PLANNER_OPTIONS) == sorted(f.name for f in
                                                 dataclasses.fields(PlannerOptions))


@pytest.mark.parametrize("field,value", [(f, v) for f, vs in BAD_PLANNER_OPTIONS.items()
                                         for v in vs])
def test_planner_options_name_option_value_and_range(field, value):
    with pytest.raises(PlannerError) as err:
        PlannerOptions(**{field: value})
    msg = str(err.value)
    assert field in msg and repr(value) in msg and "allowed:" in msg, msg
    # the same through plan(options=dict) and the error is raised before the model is read
    with pytest.raises(PlannerError, match=field):
        plan("/no/such/model.tflite", options={field: value})


def test_planner_options_accept_the_documented_values():
    PlannerOptions(max_plan_size=1, stripe_factors=64, max_width_tiles=64,
                   multi_dimensional=False, rolling_granules=(), weight_placements=["sram"],
                   allow_recompute=False, thin_frontier=2)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(device="ethos-u99"), "unknown device 'ethos-u99'; known devices: ethos-u55-32"),
    (dict(device=5), "device must be a device name or a planner Device, got int"),
    (dict(io_region="flash"), r"io_region must be one of \('sram', 'dram'\), got 'flash'"),
    (dict(budget="lots"), "budget: cannot read memory size 'lots'; write e.g. 300KiB"),
    (dict(budget=-1), "budget: a memory size must be a number of bytes >= 0, got -1"),
    (dict(budget=True), "budget: cannot read memory size True"),
    (dict(budget=float("inf")), "budget: .* got inf"),
    (dict(options=[1]), "options must be a PlannerOptions or a dict of its fields, got list"),
    (dict(options={"bogus": 1}), "unknown planner option 'bogus'; known options: max_plan_size"),
    (dict(source=5), "source must be a .tflite / .json path or a PlannerGraph, got int"),
])
def test_plan_arguments(kwargs, needle):
    args = {"source": "/no/such/model.tflite", **kwargs}
    with pytest.raises(PlannerError, match=needle):
        plan(args.pop("source"), **args)


def test_plan_io_region_conflicts_with_a_device_object():
    dev = get_device("ethos-u55-128", io_region="dram")
    with pytest.raises(PlannerError, match="io_region='sram' conflicts.*'dram'"):
        plan("/no/such/model.tflite", dev, io_region="sram")


@pytest.mark.parametrize("kwargs,needle", [
    (dict(name="nope"), "unknown device 'nope'"),
    (dict(io_region="rom"), "io_region must be one of"),
    (dict(sram_size=-1), "sram_size must be a non-negative int"),
    (dict(sram_size=True), "sram_size must be a non-negative int"),
])
def test_get_device_arguments(kwargs, needle):
    kwargs = {"name": "ethos-u55-128", **kwargs}
    with pytest.raises(PlannerError, match=needle):
        get_device(kwargs.pop("name"), **kwargs)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(weight_compression=0), r"weight_compression must be in \(0, 1\], got 0"),
    (dict(weight_compression=1.5), r"weight_compression must be in \(0, 1\], got 1.5"),
    (dict(weight_compression=True), "weight_compression must be a number"),
    (dict(weight_compression="x"), "weight_compression must be a number"),
    (dict(name=5), "name must be a str or None, got int"),
    (dict(source=3.5), "source must be a path or the file's bytes, got float"),
])
def test_load_tflite_arguments(kwargs, needle):
    kwargs = {"source": KWS, **kwargs}
    with pytest.raises(PlannerError, match=needle):
        load_tflite(kwargs.pop("source"), **kwargs)


def test_parse_size_accepts_numbers_and_units():
    import numpy as np
    assert parse_size(np.int64(7)) == 7 and parse_size(3.0) == 3
    assert parse_size("1.5KiB") == 1536 and parse_size("2MB") == 2_000_000


# ------------------------------------------------------------------------ the CLIs
def _run(main, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:          # argparse's own usage errors
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("args,needles", [
    (["--device", "ethos-u99"], ["unknown device 'ethos-u99'", "ethos-u55-128"]),
    (["--budget", "lots"], ["budget", "'lots'", "300KiB"]),
    (["--budget=-5"], ["budget", "'-5'"]),
    (["--io-region", "rom"], ["--io-region", "'rom'", "sram"]),
    (["--planner-max_plan_size", "0"], ["--planner-max_plan_size", "0", "from 1 to 256"]),
    (["--planner-max_plan_size", "abc"], ["--planner-max_plan_size", "'abc'"]),
    (["--planner-stripe_factors", "65"], ["--planner-stripe_factors", "65", "from 1 to 64"]),
    (["--planner-thin_frontier", "1"], ["--planner-thin_frontier", "1", "integer >= 2"]),
    (["--planner-rolling_granules", "1,x"], ["--planner-rolling_granules", "'x'"]),
])
def test_planner_cli_options(args, needles):
    if not os.path.exists(KWS):
        pytest.skip("ds_cnn_kws not available")
    from planner.__main__ import main
    rc, out, err = _run(main, ["plan", KWS, *args])
    assert rc == 2 and out == "" and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    for n in needles:
        assert n in last, (n, last)


@pytest.mark.parametrize("args,needles", [
    (["--target", "bogus"], ["unknown target 'bogus'", "ethos-u"]),
    (["--target", "ethos-u", "--target-ethos-u-accelerator_config", "bogus"],
     ["accelerator_config 'bogus'", "ethos-u55-128"]),
    (["--target", "ethos-u -accelerator_config=ethos-u99"], ["'ethos-u99'", "ethos-u55-128"]),
    (["--target", "ethos-n", "--target-ethos-n-tops", "3"], ["3tops", "ethos-n78-1tops"]),
    (["--target", "ethos-u", "--jobs", "0"], ["--jobs", ">= 1", "0"]),
    (["--target", "ethos-u", "--jobs", "x"], ["--jobs", "'x'"]),
    (["--target", "ethos-u", "--budget", "lots"], ["memory size 'lots'", "300KiB"]),
    (["--target", "ethos-u", "--sweep-budget", "1:2"], ["budget sweep '1:2'", "LO:HI:N"]),
    (["--target", "ethos-u", "--sweep-budget", "1KiB:2KiB:0"], ["'1KiB:2KiB:0'", "from 1"]),
    (["--target", "ethos-u", "--io-region", "rom"], ["--io-region", "'rom'", "sram"]),
    (["--target", "ethos-u", "--planner-max_plan_size=0"], ["max_plan_size", "1 to 256"]),
    (["--target", "ethos-u", "--planner-thin_frontier=1"], ["thin_frontier", ">= 2"]),
    (["--target", "ethos-u", "--planner-weight_placements=rom"], ["weight_placements", "'rom'"]),
    (["--target", "ethos-u", "--planner-stripe_factors=abc"], ["stripe_factors", "'abc'"]),
])
def test_tvmc_plan_options(args, needles):
    if not os.path.exists(KWS):
        pytest.skip("ds_cnn_kws not available")
    from tvm_ethos.cli import main
    rc, out, err = _run(main, ["plan", KWS, "--no-progress", *args])
    assert rc == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    for n in needles:
        assert n in last, (n, last)


@pytest.mark.parametrize("script", ["planner_speed.py", "planner_memory.py"])
def test_planner_benchmarks_name_a_missing_model(script, tmp_path):
    """The issue's benchmarks given a models folder without MobileNetV1-224: one line naming
    the file, no traceback."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--models",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ")
    assert str(tmp_path / "mobilenet_v1_1.0_224.tflite") in lines[0]
