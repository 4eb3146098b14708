"""The padding the layer-by-layer stream gives the NPU (``npu_ops.read_padding``): the NPU
takes the IFM's extent from the OFM size, the kernel, the stride and all four pads, so a
trailing pad no window reads must not reach its registers (the rule itself is tested on the
functional model and on Vela's streams in ``tests/ethosu_stream/test_unread_padding.py``)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pad_fold import _compile_and_check, pad_conv_model

from tvm_ethos.backends.ethos_u.npu_ops import read_padding

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(1, 7), stride=st.integers(1, 4),
       dilation=st.integers(1, 2), before=st.integers(0, 6), extra=st.integers(0, 6),
       short=st.integers(0, 3))
def test_the_npu_reads_every_ifm_row_a_window_touches_and_no_other(n, k, stride, dilation,
                                                                    before, extra, short):
    """Whatever trailing pad the operator asks for (at least what its last window reaches
    past the IFM), the NPU's extent under the cut pads (the windows' span less both pads) is
    every IFM row a window touches: the whole IFM, or its first rows where the windows stop
    short (``short`` outputs fewer)."""
    dk = (k - 1) * dilation + 1
    full_out = (n + before - dk) // stride + 1 if n + before >= dk else 0
    out = max(1, full_out - short)
    span = (out - 1) * stride + dk
    reached = max(0, span - before - n)
    asked = reached + extra
    top, left, bottom, right = read_padding((before, before, asked, asked), (n, n), (out, out),
                                            (k, k), (stride, stride), (dilation, dilation))
    assert (top, left) == (before, before)
    assert bottom == right == reached <= asked
    touched = min(n, span - before)
    assert span - top - bottom == touched


@pytest.mark.parametrize("plan", [False, True])
@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("pads,kernel", [((0, 1, 0, 1), (2, 2)), ((0, 1, 0, 0), (2, 2)),
                                         ((2, 2, 2, 2), (5, 5)), ((1, 1, 1, 1), (2, 3))])
def test_a_convolution_asking_for_padding_it_never_reads_is_exact(pads, kernel, depthwise, plan):
    """A PAD folded into a stride-2 convolution over an even IFM: part or all of its trailing
    rows and columns are never read (the fold keeps them in the convolution's padding); the
    stream matches TFLite Micro, as one convolution."""
    data = pad_conv_model(np.random.RandomState(4), (1, 8, 8, 3), pads, kernel, (2, 2),
                          depthwise=depthwise)
    commands = _compile_and_check(data, plan)
    op = "NPU_OP_DEPTHWISE" if depthwise else "NPU_OP_CONV"
    assert commands.get("NPU_OP_POOL", 0) == 0 and commands.get(op, 0) >= 1, commands
