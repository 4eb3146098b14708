"""Propagators of every operator kind against hand-computed input regions."""
from fractions import Fraction

import pytest

from planner import parts
from planner.errors import PlannerError
from planner.graph import Tensor
from planner.propagator import Propagator
from planner.stripes import StripeConfig


def x(shape=(1, 16, 16, 8)):
    return Tensor("x", shape)


def prop_region(part, k, out_shape, out_offset):
    """(shape, offset) of input k needed by one output stripe."""
    p = part.propagators[k]
    return p.apply_shape(out_shape), p.apply_offset(out_offset)


def test_rfc_example_3x3_conv():
    # seed 004: a (1,3,3,4) output stripe of an unpadded 3x3 conv over 8 channels needs (1,5,5,8)
    c = parts.conv2d("c", x((1, 10, 10, 8)), 4, kernel=3)
    shape, off = prop_region(c, 0, (1, 3, 3, 4), (0, 0, 0, 0))
    assert shape == (1, 5, 5, 8) and off == (0, 0, 0, 0)


@pytest.mark.parametrize("k,s,d,pad,h,o,expect_h,expect_o", [
    (3, 1, 1, 1, 4, 0, 6, -1),     # same-padded 3x3: h+2 rows starting one above
    (3, 2, 1, 1, 4, 2, 9, 3),      # stride 2: (4-1)*2 + 3 = 9 rows from 2*2-1
    (3, 1, 2, 2, 1, 5, 5, 3),      # dilation 2: effective kernel 5
    (5, 3, 1, 0, 2, 1, 8, 3),      # (2-1)*3 + 5 = 8
    (1, 2, 1, 0, 3, 0, 5, 0),      # 1x1 stride 2: (3-1)*2 + 1
])
def test_conv_rows(k, s, d, pad, h, o, expect_h, expect_o):
    c = parts.conv2d("c", x((1, 64, 64, 8)), 16, kernel=k, strides=s, dilation=d,
                     padding=pad)
    shape, off = prop_region(c, 0, (1, h, 7, 16), (0, o, 0, 0))
    assert shape[1] == expect_h and off[1] == expect_o
    assert shape[3] == 8   # every input channel, whatever the output channels


def test_conv_weights_and_bias_follow_output_channels():
    c = parts.conv2d("c", x(), 32, kernel=3, padding=1)
    shape, off = prop_region(c, 1, (1, 4, 4, 8), (0, 0, 0, 16))
    assert shape == (8, 3, 3, 8) and off == (16, 0, 0, 0)
    shape, off = prop_region(c, 2, (1, 4, 4, 8), (0, 0, 0, 16))
    assert shape == (8,) and off == (16,)


def test_grouped_conv_reads_its_group_channels():
    c = parts.conv2d("c", x((1, 8, 8, 16)), 8, groups=4)    # 4 in / 2 out per group
    shape, off = prop_region(c, 0, (1, 1, 1, 2), (0, 0, 0, 4))
    assert shape[3] == 4 and off[3] == 8


def test_depthwise_is_channelwise():
    dw = parts.depthwise_conv2d("d", x(), kernel=3, strides=2, padding=(0, 0, 1, 1))
    shape, off = prop_region(dw, 0, (1, 2, 3, 4), (0, 1, 0, 4))
    assert shape == (1, 5, 7, 4) and off == (0, 2, 0, 4)


def test_pool_and_global_mean():
    p = parts.pool2d("p", x(), "avg", (2, 2), (2, 2))
    assert prop_region(p, 0, (1, 3, 3, 8), (0, 2, 0, 0)) == ((1, 6, 6, 8), (0, 4, 0, 0))
    m = parts.mean("m", x())
    assert m.output.shape == (1, 1, 1, 8)
    assert prop_region(m, 0, (1, 1, 1, 4), (0, 0, 0, 4))[0] == (1, 16, 16, 4)


def test_elementwise_broadcast():
    a, b = Tensor("a", (1, 8, 8, 4)), Tensor("b", (1, 1, 1, 4))
    e = parts.elementwise("e", a, b, "add")
    assert prop_region(e, 0, (1, 2, 8, 4), (0, 3, 0, 0)) == ((1, 2, 8, 4), (0, 3, 0, 0))
    assert prop_region(e, 1, (1, 2, 8, 4), (0, 3, 0, 0)) == ((1, 1, 1, 4), (0, 0, 0, 0))
    with pytest.raises(PlannerError):
        parts.elementwise("bad", a, Tensor("c", (1, 3, 8, 4)))


def test_fully_connected_reads_whole_features():
    f = parts.fully_connected("f", Tensor("v", (1, 256)), 10)
    assert prop_region(f, 0, (1, 5), (0, 5)) == ((1, 256), (0, 0))
    assert prop_region(f, 1, (1, 5), (0, 5)) == ((5, 256), (5, 0))


def test_concatenate_offsets_each_input():
    a, b = Tensor("a", (1, 4, 4, 3)), Tensor("b", (1, 4, 4, 5))
    c = parts.concatenate("c", [a, b], axis=3)
    assert c.output.shape == (1, 4, 4, 8)
    assert prop_region(c, 1, (1, 4, 4, 2), (0, 0, 0, 4))[1] == (0, 0, 0, 1)


def test_reshape_is_opaque():
    r = parts.reshape("r", x((1, 2, 2, 4)), (1, 16))
    assert prop_region(r, 0, (1, 3), (0, 7)) == ((1, 2, 2, 4), (0, 0, 0, 0))
    with pytest.raises(PlannerError):
        parts.reshape("r2", x((1, 2, 2, 4)), (1, 15))


def test_resize_fractions_are_exact():
    r = parts.resize("r", x((1, 8, 8, 2)), scale=2)
    p = r.propagators[0]
    assert p.linear(1, 1) == Fraction(1, 2)
    sc = StripeConfig.tiled(r.output.shape, (1, 3, 16, 2), (0, 1, 0, 0))
    inp = sc.propagate(p, (1, 8, 8, 2))
    assert inp.strides[1] == Fraction(3, 2)            # not truncated to 1
    # stripe 1 covers output rows 3..5 -> input rows 1..2
    assert inp.axis_ranges(1)[1] == (1, 3)


def test_pad_and_slice_offsets():
    p = parts.pad("p", x((1, 4, 4, 2)), [(0, 0), (1, 1), (2, 0), (0, 0)])
    assert p.output.shape == (1, 6, 6, 2)
    assert p.propagators[0].apply_offset((0, 0, 0, 0)) == (0, -1, -2, 0)
    s = parts.strided_slice("s", x((1, 4, 4, 8)), (0, 0, 0, 4), (1, 4, 4, 4))
    assert s.propagators[0].apply_offset((0, 1, 0, 0)) == (0, 1, 0, 4)


def test_composition_equals_chained_propagation():
    a = parts.conv2d("a", x((1, 32, 32, 4)), 8, kernel=3, strides=2, padding=1)
    b = parts.depthwise_conv2d("b", a.output, kernel=3, padding=1)
    composed = b.propagators[0].compose(a.propagators[0])
    out = (1, 2, 16, 8)
    step = a.propagators[0].apply_shape(b.propagators[0].apply_shape(out))
    assert composed.apply_shape(out) == step
    off = a.propagators[0].apply_offset(b.propagators[0].apply_offset((0, 3, 0, 0)))
    assert composed.apply_offset((0, 3, 0, 0)) == off


def test_bad_propagator_shapes_are_rejected():
    with pytest.raises(PlannerError, match=r"offset has 2 entries, expected 1 \(one per input"):
        Propagator(((1, 0), (0, 1)), (0, 0))
    with pytest.raises(PlannerError, match="rows must all have"):
        Propagator(((1, 0), (0,)), (0,))
    with pytest.raises(PlannerError, match="augmentation row"):
        Propagator((), ())
    with pytest.raises(PlannerError, match="cannot compose"):
        Propagator.identity(2).compose(Propagator.identity(3))


def test_bad_stripe_configs_are_rejected():
    with pytest.raises(PlannerError, match="StripeConfig.stripes has 1 dims"):
        StripeConfig((4, 4), (4, 4), (4, 4), (0, 0), (1,), (0, 0))
    with pytest.raises(PlannerError, match="at least one stripe"):
        StripeConfig((4,), (4,), (4,), (0,), (0,), (0,))
    with pytest.raises(PlannerError, match="propagator expects 3 dims"):
        StripeConfig.whole((4, 4)).propagate(Propagator.identity(3), (4, 4, 4))


def test_drivers_agree_with_driving_axis_and_linear():
    """``drivers`` (the table the hot loops use) says what driving_axis/linear say, for
    every axis of propagators with zero rows, negative and fractional coefficients."""
    props = [
        Propagator.build([[0, 0], [2, 0], [0, Fraction(1, 2)]], [1, 0, 0], [0, -1, 0]),
        Propagator.build([[0, -1, 3]], [2], [Fraction(-1, 2)]),
        Propagator.identity(4),
    ]
    for prop in props:
        for i, driver in enumerate(prop.drivers()):
            j = prop.driving_axis(i)
            assert driver == (None if j is None else (j, prop.linear(i, j)))
