"""Where each ethos-u operator's stretch of the shared arena starts
(tvm_ethos/backends/ethos_u/arena_layout.py): shared tensors keep one address, space whose
tensors are all consumed is used again, and a layout that would overwrite live data is
refused by name."""

import pytest

from tvm_ethos.backends.ethos_u.arena_layout import (
    CpuStep,
    InputOverwritten,
    NpuStep,
    Slot,
    arena_bases,
)
from tvm_ethos.errors import UnsupportedModelError

NAMES = {t: f"t{t}" for t in range(10)}


def _npu(name, ifm, ofm, scratch=256):
    return NpuStep(name, (Slot(ifm, 0, 64),), (Slot(ofm, 64, 64),), scratch)


def test_a_stretch_whose_results_are_consumed_is_used_again():
    steps = [_npu("A", 0, 1), CpuStep((1,), (2,)), _npu("B", 2, 3)]
    assert arena_bases(steps, {3}, NAMES) == {"A": 0, "B": 0}


def test_a_result_still_to_be_read_keeps_its_place():
    # t1 (A's result, at 64..128) is read again after B: B starts beyond it
    steps = [_npu("A", 0, 1), CpuStep((1,), (2,)), _npu("B", 2, 3), CpuStep((1, 3), (4,))]
    bases = arena_bases(steps, {4}, NAMES)
    assert bases["A"] == 0 and bases["B"] >= 128


def test_a_tensor_two_ethos_u_operators_share_has_one_address():
    # B reads A's result directly: B's stretch starts where t1 sits at B's IFM offset
    steps = [_npu("A", 0, 1), NpuStep("B", (Slot(1, 16, 64),), (Slot(2, 96, 64),), 256)]
    assert arena_bases(steps, {2}, NAMES) == {"A": 0, "B": 48}


def test_an_input_read_again_after_its_operator_is_refused_by_name():
    steps = [_npu("A", 0, 1), CpuStep((0, 1), (2,))]
    with pytest.raises(UnsupportedModelError, match="A: its input 't0' is read again after"):
        arena_bases(steps, {2}, NAMES)


def _npu_writing(name, ifm, ofm, writes):
    return NpuStep(name, (Slot(ifm, 0, 64),), (Slot(ofm, 64, 64),), 256, writes)


def test_an_input_read_again_where_its_stream_writes_nothing_keeps_its_place():
    # A's stream writes its OFM only (64..128): t0 stays at 0..64 until the host reads it
    # again at step 3, so B (its IFM at 128 in its stretch), free to start at 0 otherwise,
    # starts beyond t0
    b = NpuStep("B", (Slot(2, 128, 64),), (Slot(3, 192, 64),), 256)
    steps = [_npu_writing("A", 0, 1, ((64, 128),)), CpuStep((1,), (2,)), b,
             CpuStep((0, 3), (4,))]
    assert arena_bases(steps, {4}, NAMES) == {"A": 0, "B": 64}
    # t0 read with t1 only: B starts at 0
    steps = [steps[0], CpuStep((0, 1), (2,)), b, CpuStep((3,), (4,))]
    assert arena_bases(steps, {4}, NAMES) == {"A": 0, "B": 0}


def test_an_input_its_stream_writes_over_is_refused_naming_the_operator():
    steps = [_npu_writing("A", 0, 1, ((64, 128), (32, 40))), CpuStep((0, 1), (2,))]
    with pytest.raises(InputOverwritten, match="A: its input 't0' is read again after it, "
                       "and its stream writes over it") as err:
        arena_bases(steps, {2}, NAMES)
    assert err.value.operator == "A"


def _stateful(writes):
    """A (input t0, state t5) then B reading A's result t1 (state t6): B's stretch starts
    80 bytes under A's and reaches over A's state (16..80) to its result."""
    a = NpuStep("A", (Slot(0, 0, 16), Slot(5, 16, 64)), (Slot(1, 80, 16),), 96,
                ((16, 96),))
    b = NpuStep("B", (Slot(1, 160, 16), Slot(6, 0, 64)), (Slot(2, 176, 16),), 192, writes)
    return [a, b]


def test_a_stretch_may_cover_a_state_its_stream_does_not_write():
    # B writes its state (0..64) and its result (176..192): A's state stays intact from
    # one invocation to the next; a stream whose writes are unknown, or reach it, may not
    steps = _stateful(((0, 64), (176, 192)))
    assert arena_bases(steps, {2}, NAMES, frozenset({5, 6})) == {"A": 80, "B": 0}
    for writes in (None, ((0, 64), (100, 120), (176, 192))):
        with pytest.raises(UnsupportedModelError, match="B: its stream would overwrite "
                                                        "tensor 't5'"):
            arena_bases(_stateful(writes), {2}, NAMES, frozenset({5, 6}))
