"""The held-slice rule (planner.staged_slices) against a brute force of the staging buffer:
two halves that keep what was last loaded into them, slices visited in ``slice_order``, a
DMA only for a slice neither half holds, into the half not read last."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.staged_slices import channel_loads, slice_load_counts, slice_loads, slice_order


def _brute_force(slices: int, operations: int) -> list[int]:
    """Loads of each slice, simulating the two halves."""
    held, turn, loads = [None, None], 0, [0] * slices
    for op in range(operations):
        for k in slice_order(slices, op):
            if k in held:
                turn = 1 - held.index(k)
                continue
            held[turn] = k
            loads[k] += 1
            turn = 1 - turn
    return loads


@given(slices=st.integers(0, 12), operations=st.integers(0, 40))
def test_the_counts_are_the_halves_simulated(slices, operations):
    """Each slice's loads, their sum and the channels they carry are what two halves that
    keep their slices load, for any slices and operations."""
    loads = _brute_force(slices, operations)
    assert list(slice_load_counts(slices, operations)) == loads
    assert slice_loads(slices, operations) == sum(loads)
    assert channel_loads(16 * slices, 16, operations) == 16 * sum(loads)


@given(channels=st.integers(1, 200), width=st.integers(1, 32), operations=st.integers(0, 30))
def test_a_short_last_slice_carries_only_its_channels(channels, width, operations):
    """Channels cut into slices of ``width``, the last holding the rest: the channels loaded
    are each slice's loads times its channels."""
    slices = -(-channels // width)
    counts = _brute_force(slices, operations)
    assert channel_loads(channels, width, operations) == sum(
        n * min(width, channels - k * width) for k, n in enumerate(counts))


@given(operations=st.integers(1, 50), slices=st.integers(1, 12))
def test_one_or_two_slices_load_once_and_more_reload_all_but_two(operations, slices):
    """A Part of one or two slices loads them once per Plan; of more, every slice first,
    then all but the two held after each operation."""
    want = slices if slices <= 2 else slices + (operations - 1) * (slices - 2)
    assert slice_loads(slices, operations) == want
    assert slice_loads(slices, operations) <= slices * operations


def test_every_operation_runs_every_slice_once_alternating():
    assert list(slice_order(4, 0)) == [0, 1, 2, 3]
    assert list(slice_order(4, 1)) == [3, 2, 1, 0]
    assert list(slice_order(4, 2)) == [0, 1, 2, 3]


@pytest.mark.parametrize("slices,operations", [(-1, 3), (3, -1)])
def test_a_negative_count_is_refused_by_name(slices, operations):
    with pytest.raises(ValueError, match="must be counts"):
        slice_loads(slices, operations)


def test_a_slice_width_below_one_is_refused_by_name():
    with pytest.raises(ValueError, match="slice_channels must be 1 or more"):
        channel_loads(32, 0, 2)
