"""Stripe counting with edge clipping and the exact ring arithmetic."""

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planner.stripes import StripeConfig
from planner.windows import ring_rows, window


def test_count_stripes_clips_edges():
    sc = StripeConfig.tiled((1, 10, 7, 4), (1, 4, 3, 4), (0, 1, 2, 0))
    counts = sc.count_stripes()
    assert counts == {(1, 4, 3, 4): 4, (1, 4, 1, 4): 2, (1, 2, 3, 4): 2, (1, 2, 1, 4): 1}


def test_overlapping_stripes_clip_at_both_ends():
    # 3-row windows with stride 2 starting at -1 over 8 rows (a padded 3x3 s2 input)
    sc = StripeConfig((1, 3, 8, 1), (1, 8, 8, 1), (1, 2, 8, 1), (0, 1, 0, 0), (1, 4, 1, 1),
                      (0, -1, 0, 0))
    assert sc.axis_ranges(1) == ((0, 2), (1, 4), (3, 6), (5, 8))
    assert sc.count_stripes() == {(1, 2, 8, 1): 1, (1, 3, 8, 1): 3}


@given(st.integers(1, 60), st.integers(1, 60))
def test_tiling_covers_extent_once(extent, size):
    sc = StripeConfig.tiled((extent,), (size,), (1,))
    ranges = sc.axis_ranges(0)
    assert ranges[0][0] == 0 and ranges[-1][1] == extent
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert sum(sc.count_stripes().values()) == sc.total_stripes


def brute_ring(windows, h):
    """Replay demand-driven chunked production row by row; track the live span."""
    lo = min(a for a, _ in windows)
    hi = max(b for _, b in windows)
    frontier, need = lo, 0
    for a, b in windows:
        while frontier < b:
            frontier = min(hi, frontier + h)
        need = max(need, frontier - a)
    return need


@settings(max_examples=200)
@given(k=st.integers(1, 7), s=st.integers(1, 3), pad=st.integers(0, 3), n=st.integers(4, 40),
       rows=st.integers(1, 4), h=st.integers(1, 6))
def test_ring_rows_matches_row_by_row_replay(k, s, pad, n, rows, h):
    extent = (n - 1) * s + k - 2 * pad
    if extent < 1:
        return
    chunks = [(c, min(c + rows, n)) for c in range(0, n, rows)]
    wins = tuple(window(c0, c1, s, k - s, -pad, extent) for c0, c1 in chunks)
    wins = tuple(w for w in wins if w[1] > w[0])
    assume(wins)
    got, lo, hi = ring_rows(wins, h)
    assert got == brute_ring(wins, h)
    # a ring never needs more than the window plus one chunk, nor less than a window
    assert max(b - a for a, b in wins) <= got <= max(b - a for a, b in wins) + h - 1


def test_contiguous_runs_merge_whole_trailing_axes():
    from planner.plan_costing import contiguous_runs
    shape = (1, 10, 12, 8)
    assert contiguous_runs(shape, shape) == 1                 # whole tensor: one run
    assert contiguous_runs((1, 3, 12, 8), shape) == 1         # full rows: one run
    assert contiguous_runs((1, 3, 5, 8), shape) == 3          # a column tile: one run per row
    assert contiguous_runs((1, 3, 5, 4), shape) == 15         # channel slice: one per pixel


@st.composite
def stripe_configs(draw):
    """Any 1-3 axis StripeConfig: overlapping or gapped stripes, fractional strides and
    offsets (upscaling), stripes running off either end."""
    from fractions import Fraction
    rank = draw(st.integers(1, 3))
    axes = []
    for _ in range(rank):
        extent = draw(st.integers(1, 30))
        n = draw(st.integers(1, 12))
        stride = draw(st.one_of(st.integers(1, 8),
                                st.builds(Fraction, st.integers(1, 16), st.integers(1, 4))))
        offset = draw(st.one_of(st.integers(-4, 4),
                                st.builds(Fraction, st.integers(-8, 8), st.integers(1, 4))))
        axes.append((draw(st.integers(1, 10)), extent, stride, offset, n))
    return StripeConfig(tuple(a[0] for a in axes), tuple(a[1] for a in axes),
                        tuple(a[2] for a in axes), tuple(range(1, rank + 1)),
                        tuple(a[4] for a in axes), tuple(a[3] for a in axes))


@settings(max_examples=300)
@given(stripe_configs())
def test_counts_and_longest_stripes_match_every_stripe_listed(sc):
    """count_stripes and max_spans against the clipped ranges of every single stripe."""
    import itertools
    from collections import Counter
    rank = len(sc.shape)
    per_axis = [[hi - lo for lo, hi in sc.axis_ranges(a)] for a in range(rank)]
    assert sc.count_stripes() == Counter(itertools.product(*per_axis))
    assert sc.max_spans() == tuple(max(sizes) for sizes in per_axis)


@st.composite
def integer_propagations(draw):
    """(integer StripeConfig, integer propagator moving each input axis by at most one output
    axis, input shape): the cases ``StripeConfig.propagate`` computes on its fast path."""
    from planner.propagator import Propagator
    rank = draw(st.integers(1, 4))
    axes = [(draw(st.integers(1, 10)), draw(st.integers(1, 30)), draw(st.integers(1, 8)),
             draw(st.integers(-4, 4)), draw(st.integers(1, 12))) for _ in range(rank)]
    order = tuple(draw(st.permutations(range(1, rank + 1))))
    sc = StripeConfig(tuple(a[0] for a in axes), tuple(a[1] for a in axes),
                      tuple(a[2] for a in axes), order, tuple(a[4] for a in axes),
                      tuple(a[3] for a in axes))
    in_rank = draw(st.integers(1, 4))
    linear, const, offset = [], [], []
    for _ in range(in_rank):
        row = [0] * rank
        driver = draw(st.one_of(st.none(), st.integers(0, rank - 1)))
        if driver is not None:
            row[driver] = draw(st.integers(-3, 4).filter(bool))
        linear.append(row)
        const.append(draw(st.integers(-2, 6)))
        offset.append(draw(st.integers(-3, 3)))
    prop = Propagator.build(linear, const, offset)
    shape = tuple(draw(st.integers(1, 40)) for _ in range(in_rank))
    return sc, prop, shape


@settings(max_examples=300)
@given(integer_propagations())
def test_integer_fast_path_equals_exact_propagation(case):
    """The integer-only propagation (and the unchecked constructor it builds with) gives the
    same config, field types included, as the exact one that handles Fractions, applied to
    the config with its single stripes clipped to the tensor (which the fast path does as it
    reads them)."""
    from planner.stripes import _clipped_single_stripes
    sc, prop, shape = case
    maps = prop.integer_axis_maps()
    assert maps is not None
    fast = sc._propagate_integers(maps, shape)
    exact = _clipped_single_stripes(sc)._propagate_exact(prop, shape)
    assert fast == exact and hash(fast) == hash(exact)
    for name in ("shape", "extent", "strides", "order", "stripes", "offset"):
        assert [type(v) for v in getattr(fast, name)] == [type(v) for v in getattr(exact, name)]
    assert sc.propagate(prop, shape) == exact


def test_integer_axis_maps_only_for_integer_single_driver_rows():
    from fractions import Fraction

    from planner.propagator import Propagator
    assert Propagator.build([[2, 0], [0, 1]], [1, 0], [-1, 0]).integer_axis_maps() == \
        ((0, 2, 1, -1), (1, 1, 0, 0))
    assert Propagator.build([[0, 0]], [3], [0]).integer_axis_maps() == ((None, 0, 3, 0),)
    assert Propagator.build([[1, 1]], [0], [0]).integer_axis_maps() is None      # two drivers
    assert Propagator.build([[Fraction(1, 2)]], [0], [0]).integer_axis_maps() is None
    assert Propagator.build([[1]], [0], [Fraction(-1, 2)]).integer_axis_maps() is None


@settings(max_examples=200)
@given(stripe_configs(), st.integers(1, 3), st.integers(-2, 4), st.integers(-3, 3),
       st.integers(1, 40), st.integers(1, 6))
def test_rolled_axis_is_the_ring_of_the_readers_windows(reader, lin, const, off, extent, h):
    """The ring memoised on the reader's axis scalars equals the ring of the windows its
    stripes read, listed one by one (a memo keyed wrongly would answer another reader's)."""
    from planner.plan_costing import _rolled_axis
    for b in range(len(reader.shape)):
        wins = tuple(window(lo, hi, lin, const, off, extent)
                     for lo, hi in reader.axis_ranges(b) if hi > lo)
        live = [w for w in wins if w[1] > w[0]]
        span = max(1, max(w[1] for w in live) - min(w[0] for w in live)) if live else 1
        chunk = min(h, span)
        assert _rolled_axis(reader, b, lin, const, off, extent, h) == \
            (chunk,) + ring_rows(wins, chunk, extent)


@settings(max_examples=200)
@given(stripe_configs(), st.data())
def test_lockstep_counts_are_the_work_ranges_counted(sc, data):
    """A lockstep producer's count_stripes (memoised per axis on its scalars) counts the
    rows each step computes: along its rolling axis only those past the previous step's
    window (``work_ranges``), along the others its whole stripes."""
    import itertools
    from collections import Counter

    from planner.lockstep import LockstepStripes
    axis = data.draw(st.integers(-1, len(sc.shape) - 1))
    cfg = LockstepStripes(sc.shape, sc.extent, sc.strides, sc.order, sc.stripes, sc.offset,
                          rolling_axis=axis, prologue=data.draw(st.integers(0, 3)))
    per_axis = [[hi - lo for lo, hi in cfg.work_ranges(a)] for a in range(len(sc.shape))]
    assert cfg.count_stripes() == Counter(itertools.product(*per_axis))
    for a, sizes in enumerate(per_axis):
        assert cfg.work_sizes(a) == tuple(sorted(Counter(sizes).items()))


@settings(max_examples=200)
@given(stripe_configs(), st.integers(-1, 2), st.integers(0, 3))
def test_unchecked_configs_keep_the_hash_a_checked_one_computes(sc, axis, prologue):
    """The hashes the unchecked constructors keep from the start equal those a config built
    through ``__init__`` computes when first asked, for plain and lockstep configs, so the
    memos find a config whichever way it was built."""
    from planner.lockstep import LockstepStripes, _unchecked_lockstep
    from planner.stripes import unchecked_config
    fields = (sc.shape, sc.extent, sc.strides, sc.order, sc.stripes, sc.offset)
    fast = unchecked_config(*fields)
    assert fast == sc and hash(fast) == hash(StripeConfig(*fields))
    rolling = min(axis, len(sc.shape) - 1)
    lock = _unchecked_lockstep(sc, sc.stripes, sc.offset, rolling, prologue)
    checked = LockstepStripes(*fields, rolling_axis=rolling, prologue=prologue)
    assert lock == checked and hash(lock) == hash(checked)
    assert StripeConfig.__hash__(lock) == StripeConfig.__hash__(checked) == hash(sc)


@settings(max_examples=200)
@given(stripe_configs(), st.data())
def test_every_axis_work_sizes_at_once_equal_each_axis_asked(sc, data):
    """``_every_work_sizes`` (one pass over the fields, what count_stripes reads) answers
    ``work_sizes`` of each axis, for plain configs and lockstep ones rolling along any axis
    or none; ``max_spans`` is the longest stripe of every axis's clipped ranges."""
    from planner.lockstep import LockstepStripes
    rank = len(sc.shape)
    cfg = LockstepStripes(sc.shape, sc.extent, sc.strides, sc.order, sc.stripes, sc.offset,
                          rolling_axis=data.draw(st.integers(-1, rank - 1)),
                          prologue=data.draw(st.integers(0, 3)))
    for config in (sc, cfg):
        assert config._every_work_sizes() == [config.work_sizes(a) for a in range(rank)]
        assert config.max_spans() == tuple(max(hi - lo for lo, hi in config.axis_ranges(a))
                                           for a in range(rank))
