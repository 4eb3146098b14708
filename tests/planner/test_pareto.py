"""Pareto culling and frontier combination against brute force."""
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from planner.pareto import (
    INT64_SAFE,
    ONE_KEY_MIN,
    combine,
    combine_segments,
    frontier,
    frontier_order,
    thin,
)
from planner.point_sets import culled, extended, merged, staged_frontier

pts = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=0, max_size=40)


def brute(points):
    keep = []
    for i, (m, c) in enumerate(points):
        dominated = any((m2 <= m and c2 <= c and (m2, c2) != (m, c)) for m2, c2 in points)
        if not dominated and (m, c) not in keep:
            keep.append((m, c))
    return sorted(keep)


@given(pts)
def test_frontier_is_exact(points):
    got = frontier([(m, c, i) for i, (m, c) in enumerate(points)])
    assert [(m, c) for m, c, _ in got] == brute(points)
    # the first of identical points is kept: deterministic payloads
    for m, c, i in got:
        assert i == points.index((m, c))


@given(pts, pts)
def test_combine_equals_brute_force(a, b):
    fa = frontier([(m, c, None) for m, c in a])
    fb = frontier([(m, c, None) for m, c in b])
    got = combine(fa, fb)
    expect = brute([(max(m1, m2), c1 + c2) for m1, c1, _ in fa for m2, c2, _ in fb])
    assert [(m, c) for m, c, _ in got] == expect
    for m, c, (ia, ib) in got:
        assert (max(fa[ia][0], fb[ib][0]), fa[ia][1] + fb[ib][1]) == (m, c)


def test_thinning_is_opt_in_and_keeps_ends():
    f = [(k, 100 - k, None) for k in range(50)]
    assert thin(f, None) == f
    t = thin(f, 5)
    assert len(t) == 5 and t[0] == f[0] and t[-1] == f[-1]


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=25),
       st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 0), st.booleans()),
                min_size=1, max_size=3))
@example(raw=[(0, 5), (2, 1)], opts=[(1, -1, False), (1, -1, True)])   # a tie: first wins
@example(raw=[(0, 5), (2, 1), (4, 0)], opts=[(0, -2, False), (1, -1, True)])   # 1st better
@example(raw=[(0, 5), (2, 1), (4, 0)], opts=[(2, -1, False), (1, -1, True)])   # 2nd better
@example(raw=[(0, 5), (2, 1), (4, 0)], opts=[(1, -3, False), (2, -1, True)])   # neither
def test_extending_a_pareto_set_equals_culling_every_pair(raw, opts):
    """point_sets.extended (the walk's merge of a Pareto set under each placement) keeps
    exactly the points, and the ties, that culling every point x placement pair would keep."""
    points = [(m, c, f"spec{k}", ()) for k, (m, c, _) in
              enumerate(frontier([(m, c, None) for m, c in raw]))]
    options = [(dm, dc, ("p",) if copy else ()) for dm, dc, copy in opts]
    every = [(m + dm, c + dc, spec, copied + extra)
             for m, c, spec, copied in points for dm, dc, extra in options]
    got = extended(culled(points), options)
    assert list(zip(*got)) == [(m, c, (spec, copied)) for m, c, spec, copied in frontier(every)]


@given(st.lists(pts, min_size=1, max_size=4), st.data())
def test_merged_and_staged_sets_equal_culling_the_listing(sets, data):
    """point_sets.merged (groups meeting on one key) and staged_frontier (every group of an
    interval, its staging added) keep frontier's survivors of the points listed set by set,
    ties to the first listed, whatever the values' size (past INT64_SAFE too)."""
    listed = [[(m, c, f"s{k}", (f"p{i}",)) for i, (m, c) in enumerate(s)]
              for k, s in enumerate(sets)]
    columns = [culled(s) for s in listed]
    every = [(m, c, (spec, copied)) for s in columns for m, c, (spec, copied) in zip(*s)]
    assert list(zip(*merged(columns))) == frontier(every)
    huge = data.draw(st.booleans())
    stages = [data.draw(st.integers(0, 20)) + (INT64_SAFE if huge else 0) for _ in sets]
    staged = [(m + stage, c, p) for stage, s in zip(stages, columns) for m, c, p in zip(*s)]
    assert list(zip(*staged_frontier(list(zip(stages, columns))))) == frontier(staged)


# ----- the same rules on int64 columns (the Proposal DP's path) ------------------------------

def _columns(points):
    return (np.array([m for m, _, *_ in points], np.int64),
            np.array([c for _, c, *_ in points], np.int64))


@given(pts)
@example([(3, 3), (3, 3), (1, 5), (3, 3), (1, 5), (2, 4)])   # duplicates: the first is kept
def test_frontier_order_equals_frontier(points):
    """The column cull keeps exactly frontier's survivors, in its order, ties to the first."""
    got = frontier_order(*_columns(points)).tolist()
    assert got == [i for _, _, i in frontier([(m, c, i) for i, (m, c) in enumerate(points)])]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=ONE_KEY_MIN,
                max_size=2 * ONE_KEY_MIN),
       st.sampled_from([(1, 1), (2 ** 40, 1), (1, 2 ** 40), (2 ** 31, 2 ** 31)]),
       st.sampled_from([0, -(2 ** 50)]))
def test_frontier_order_on_one_key_equals_frontier(points, scale, shift):
    """From ONE_KEY_MIN points frontier_order sorts on one combined key where memory and
    cycle spans fit in int64, on two keys where they do not (the largest scales): the same
    survivors, order and ties either way, negative values included."""
    points = [(m * scale[0] + shift, c * scale[1]) for m, c in points]
    got = frontier_order(*_columns(points)).tolist()
    assert got == [i for _, _, i in frontier([(m, c, i) for i, (m, c) in enumerate(points)])]


# memories on a scale that makes the segment keys large too; frontiers drawn from raw points
# in a small range, so the same memories and cycle sums recur across sides and segments
scales = st.sampled_from([1, 7, 2 ** 40])
segment_pairs = st.lists(st.tuples(pts, pts), max_size=5)


def _brute_combine(a, b):
    """The definition: every pair of a x b, culled (pairs listed a-major)."""
    return frontier([(max(ma, mb), ca + cb, (i, k))
                     for i, (ma, ca, *_) in enumerate(a) for k, (mb, cb, *_) in enumerate(b)])


def _segments(pairs, scale, culled):
    """(a, b) lists per segment, memories scaled; each a frontier if ``culled`` or else just
    sorted by memory (duplicates and dominated points left in)."""
    def side(raw):
        points = [(m * scale, c, None) for m, c in raw]
        return frontier(points) if culled else sorted(points, key=lambda p: p[0])
    return [(side(a), side(b)) for a, b in pairs]


def _combined(segments):
    """combine_segments on the segments, as (memory, cycles, segment, ia, ib) rows with
    indices local to each segment."""
    a_len = [len(a) for a, _ in segments]
    b_len = [len(b) for _, b in segments]
    am, ac = _columns([p for a, _ in segments for p in a])
    bm, bc = _columns([p for _, b in segments for p in b])
    memory, cycles, seg, ia, ib = combine_segments(am, ac, a_len, bm, bc, b_len)
    a_first = np.cumsum([0] + a_len)[seg]
    b_first = np.cumsum([0] + b_len)[seg]
    return memory, cycles, seg, ia - a_first, ib - b_first


@given(segment_pairs, scales)
@example([([(1, 5), (2, 2)], [(1, 3), (2, 0)]), ([(1, 5), (2, 2)], [(1, 3), (2, 0)])], 1)
def test_combined_segments_equal_brute_force_over_each_pair(pairs, scale):
    """Per segment the candidates, culled, are the brute-force frontier of a x b with the same
    pairs; culled all together they are the frontier of those, ties to the first segment."""
    segments = _segments(pairs, scale, culled=True)
    memory, cycles, seg, ia, ib = _combined(segments)
    rows = list(zip(memory.tolist(), cycles.tolist(), zip(seg.tolist(), ia.tolist(),
                                                           ib.tolist())))
    expect = []
    for s, (a, b) in enumerate(segments):
        mine = [r for r in rows if r[2][0] == s]
        keep = frontier_order(*_columns(mine)).tolist()
        assert [mine[k] for k in keep] == [(m, c, (s, i, k))
                                           for m, c, (i, k) in _brute_combine(a, b)]
        expect += [(m, c, (s, i, k)) for m, c, (i, k) in _brute_combine(a, b)]
    assert [rows[k] for k in frontier_order(memory, cycles).tolist()] == frontier(expect)


@given(segment_pairs, scales)
def test_combined_segments_equal_combine_on_any_memory_sorted_input(pairs, scale):
    """combine's own loop (the fastest-fitting point of each side per threshold) on inputs
    sorted by memory but not culled, duplicates included: the columns give the same pairs."""
    segments = _segments(pairs, scale, culled=False)
    memory, cycles, seg, ia, ib = _combined(segments)
    for s, (a, b) in enumerate(segments):
        mine = [k for k in range(len(seg)) if seg[k] == s]
        keep = [mine[k] for k in frontier_order(memory[mine], cycles[mine]).tolist()]
        assert [(memory[k], cycles[k], (ia[k], ib[k])) for k in keep] == combine(a, b)


def test_combine_segments_refuses_keys_past_int64():
    big = np.array([0, 2 ** 61], np.int64)
    cycles = np.array([1, 0], np.int64)
    with pytest.raises(OverflowError):
        combine_segments(big, cycles, [1, 1], big, cycles, [1, 1])
