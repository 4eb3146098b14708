"""The bounded search that places a Proposal's arena blocks within the plan's peak where no
first fit does (tvm_ethos/backends/ethos_u/arena_packing.py, used by
``stream_plan.arena_layout``): what it returns is always a valid layout, it finds one
wherever brute force does on small sets and on sets built to tile the peak exactly, and
it places the resnet8 frontier Proposal whose stream used to outgrow its plan."""
from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.backends.ethos_u.arena_packing import packed_offsets
from tvm_ethos.backends.ethos_u.stream_plan import Buffer, arena_layout


def valid(blocks, peak, offsets) -> bool:
    """Every block within [0, peak) on its alignment, no two live in one Plan overlapping."""
    for b in blocks:
        o = offsets[b.name]
        if o < 0 or o + b.nbytes > peak or o % b.align:
            return False
    for a, b in itertools.combinations(blocks, 2):
        if a.nbytes and b.nbytes and not (a.last < b.first or b.last < a.first):
            oa, ob = offsets[a.name], offsets[b.name]
            if not (oa + a.nbytes <= ob or ob + b.nbytes <= oa):
                return False
    return True


def brute_force(blocks, peak) -> bool:
    """Whether any placement within ``peak`` exists: every aligned offset of every block."""
    placed = []

    def place(i):
        if i == len(blocks):
            return True
        b = blocks[i]
        for o in range(0, peak - b.nbytes + 1, b.align):
            if all(o + b.nbytes <= p or p + n <= o for p, n, lo, hi in placed
                   if not (hi < b.first or lo > b.last)):
                placed.append((o, b.nbytes, b.first, b.last))
                if place(i + 1):
                    return True
                placed.pop()
        return False

    return place(0)


@st.composite
def small_sets(draw):
    """Up to 5 blocks over 4 Plans and a peak from their most bytes live at once to 3 above."""
    n = draw(st.integers(1, 5))
    blocks = []
    for i in range(n):
        first = draw(st.integers(0, 3))
        align = draw(st.sampled_from((1, 1, 2, 4)))
        blocks.append(Buffer(f"b{i}", draw(st.integers(1, 6)) * align, align, first,
                             draw(st.integers(first, 3))))
    live = max(sum(b.nbytes for b in blocks if b.first <= k <= b.last) for k in range(4))
    return blocks, live + draw(st.integers(0, 3))


@st.composite
def tilings(draw, plans: int = 6, depth: int = 4):
    """Blocks that tile [0, peak) x Plans exactly (cut in address or in time, recursively):
    every Plan holds the peak, so a placement at the peak exists and no byte is spare."""
    unit = draw(st.sampled_from((1, 16)))
    peak_units = draw(st.integers(4, 40))
    blocks = []

    def cut(lo, hi, first, last, d):
        kind = draw(st.sampled_from(("block", "address", "time"))) if d else "block"
        if kind == "address" and hi - lo > 1:
            mid = draw(st.integers(lo + 1, hi - 1))
            cut(lo, mid, first, last, d - 1)
            cut(mid, hi, first, last, d - 1)
        elif kind == "time" and last > first:
            mid = draw(st.integers(first, last - 1))
            cut(lo, hi, first, mid, d - 1)
            cut(lo, hi, mid + 1, last, d - 1)
        else:
            blocks.append(Buffer(f"t{len(blocks)}", (hi - lo) * unit, unit, first, last))

    cut(0, peak_units, 0, plans - 1, depth)
    return draw(st.permutations(blocks)), peak_units * unit


@settings(max_examples=150, deadline=None)
@given(small_sets())
def test_a_placement_is_found_wherever_brute_force_finds_one(case):
    blocks, peak = case
    offsets = packed_offsets(blocks, peak)
    assert (offsets is not None) == brute_force(blocks, peak)
    if offsets is not None:
        assert valid(blocks, peak, offsets)


@settings(max_examples=100, deadline=None)
@given(tilings())
def test_blocks_that_tile_the_peak_are_placed_within_it(case):
    blocks, peak = case
    offsets = packed_offsets(blocks, peak)
    assert offsets is not None
    assert valid(blocks, peak, offsets)


def test_a_search_out_of_placements_gives_up():
    # three 2-byte blocks live at once cannot share 5 bytes; with no placement to try the
    # search stops at once, with one it fails after it
    blocks = [Buffer(n, 2, 1, 0, 0) for n in "abc"]
    assert packed_offsets(blocks, 5) is None
    assert packed_offsets(blocks, 6, max_work=0) is None
    assert valid(blocks, 6, packed_offsets(blocks, 6))


#: resnet8_cifar's frontier Proposal 46 on an ethos-u55-128 (Size's neighbourhood): the
#: arena blocks its stream lays out (bytes, alignment, first and last Plan). The planner's
#: peak is 33,920 B (Plan 3: three 8 KiB tensors and its 9,344 B of weights); every first
#: fit needed 37,504 B, so the stream used to grow past its plan.
RESNET8_K46 = (
    ("input0", 3072, 1, 0, 0, "input"), ("l3_add_out", 16384, 1, 0, 2, "tensor"),
    ("l4_conv2d_out", 8192, 1, 1, 4, "tensor"), ("l5_conv2d_out", 8192, 1, 2, 3, "tensor"),
    ("l6_conv2d_out", 8192, 1, 3, 4, "tensor"), ("l7_add_out", 8192, 1, 4, 6, "tensor"),
    ("l10_conv2d_out", 4096, 1, 5, 7, "tensor"), ("l8_conv2d_out", 4096, 1, 6, 7, "tensor"),
    ("l14_softmax_out", 10, 1, 7, 7, "tensor"), ("l0_conv2d_out", 3456, 1, 0, 0, "tensor"),
    ("l1_conv2d_out", 2720, 1, 0, 0, "tensor"), ("l2_conv2d_out", 2048, 1, 0, 0, "tensor"),
    ("weights@plan0", 4736, 16, 0, 0, "weights"), ("weights@plan1", 640, 16, 1, 1, "weights"),
    ("weights@plan3", 9344, 16, 3, 3, "weights"), ("weights@plan5", 1152, 16, 5, 5, "weights"),
    ("weights@plan6", 9344, 16, 6, 6, "weights"), ("l9_conv2d_out", 4096, 1, 7, 7, "tensor"),
    ("l11_add_out", 4096, 1, 7, 7, "tensor"), ("l12_avg_pool2d_out", 64, 1, 7, 7, "tensor"),
    ("l13_fully_connected_out", 10, 1, 7, 7, "tensor"), ("__work14", 292, 16, 7, 7, "work"),
)


def test_the_resnet8_proposal_that_outgrew_its_plan_is_laid_out_at_its_peak():
    buffers = [Buffer(*row) for row in RESNET8_K46]
    peak = max(sum(b.nbytes for b in buffers if b.first <= k <= b.last) for k in range(8))
    assert peak == 33_920
    layout = arena_layout(buffers, peak)
    assert layout.size == peak and layout.aligned()
    assert valid(buffers, peak, layout.offsets)
