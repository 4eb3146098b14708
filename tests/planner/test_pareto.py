"""Pareto culling and frontier combination against brute force."""
from hypothesis import example, given, strategies as st

from planner.pareto import combine, frontier, thin

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
    """plans._extended (the walk's merge of a Pareto set under each placement) keeps exactly
    the points, and the ties, that culling every point x placement pair would keep."""
    from planner.plans import _extended, _pareto
    points = [(m, c, f"spec{k}", ()) for k, (m, c, _) in
              enumerate(_pareto([(m, c, None) for m, c in raw]))]
    options = [(dm, dc, ("p",) if copy else ()) for dm, dc, copy in opts]
    every = [(m + dm, c + dc, spec, copied + extra)
             for m, c, spec, copied in points for dm, dc, extra in options]
    assert _extended(points, options) == _pareto(every)
