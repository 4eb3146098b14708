"""One rule checks the executor's options (tvm_ethos/runtime/options.py): ``load``, the
executor and the edge planner give the same OptionError for the same bad value, and accept
exactly the values the rule accepts."""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tvm_ethos.errors import ModelLoadError, OptionError
from tvm_ethos.runtime.allocators import MemorySource
from tvm_ethos.runtime.executor import Executor
from tvm_ethos.runtime.fallback_memory import BackendCapabilities, plan_edge
from tvm_ethos.runtime.options import (
    FALLBACK_MODES,
    MISALIGNED_POLICIES,
    RUNTIME_OPTIONS,
    check_runtime_options,
)

_VALUES = {
    "fallback_mode": st.sampled_from(FALLBACK_MODES + ("zero-copy", "", None, "IMPORT", 1)),
    "misaligned": st.sampled_from(MISALIGNED_POLICIES + ("ignore", None, True)),
    "max_requests": st.sampled_from((1, 2, 64, 0, -1, 2.0, "4", True, None)),
    "opencl_device": st.sampled_from((None, "pocl", "x:y", 0, b"pocl", 1.5)),
    "npu_runtime": st.sampled_from(("tir", "stream", "vela", "", None, "STREAM")),
}
_OPTIONS = st.fixed_dictionaries({}, optional=_VALUES)


def _good(key: str, value) -> bool:
    """The rule written out independently, value by value."""
    if key == "fallback_mode":
        return value in ("auto", "import", "copy")
    if key == "misaligned":
        return value in ("copy", "reject")
    if key == "max_requests":
        return type(value) is int and value >= 1
    if key == "npu_runtime":
        return value in ("tir", "stream")
    return value is None or type(value) is str


def _error(fn, *args, **kwargs) -> str | None:
    try:
        fn(*args, **kwargs)
    except OptionError as err:
        return str(err)
    return None


def test_the_rule_covers_every_runtime_option():
    assert set(_VALUES) == set(RUNTIME_OPTIONS)


@given(_OPTIONS)
@example({"max_requests": True})       # a bool is no count
@example({"fallback_mode": "copy", "misaligned": "reject", "max_requests": 1})
@settings(max_examples=200, deadline=None)
def test_rule_accepts_exactly_the_documented_values(opts):
    bad = [k for k in RUNTIME_OPTIONS if k in opts and not _good(k, opts[k])]
    msg = _error(check_runtime_options, opts)
    if bad:
        assert msg is not None and f"option '{bad[0]}'" in msg and repr(opts[bad[0]]) in msg
    else:
        assert msg is None


def test_unknown_option_is_named_with_those_allowed():
    msg = _error(check_runtime_options, {"fallback": "copy"})
    assert msg == ("unknown runtime option(s) fallback; allowed: "
                   "fallback_mode, opencl_device, misaligned, max_requests, npu_runtime")


@given(_OPTIONS)
@settings(max_examples=60, deadline=None)
def test_every_entry_point_gives_the_rules_error(tmp_path_factory, opts):
    """``tvm_ethos.load`` checks before it looks for the file; the executor before it reads its
    program: both reject exactly what the rule rejects, in the rule's words."""
    want = _error(check_runtime_options, opts)
    missing = tmp_path_factory.getbasetemp() / "no-such-model.tar"
    if want is None:
        with pytest.raises(ModelLoadError, match="not found"):
            tvm_ethos.load(missing, **opts)
    else:
        assert _error(tvm_ethos.load, missing, **opts) == want
        assert _error(Executor, None, **opts) == want


_CPU = BackendCapabilities("cpu", import_sources=frozenset(MemorySource),
                           export_sources=frozenset(MemorySource))
_GPU = BackendCapabilities("gpu", import_sources=frozenset(MemorySource),
                           export_sources=frozenset(MemorySource))


@pytest.mark.parametrize("mode", ["zero-copy", None, "Import"])
def test_edge_planner_uses_the_rule(mode):
    assert _error(plan_edge, _CPU, _GPU, mode) == _error(check_runtime_options,
                                                         {"fallback_mode": mode})


@pytest.mark.parametrize("mode", FALLBACK_MODES)
def test_edge_planner_takes_every_mode(mode):
    assert plan_edge(_CPU, _GPU, mode).mode == mode
