"""The convolution's sums of products against Python integers: float32 (exact while the bound
on partial sums is below 2**24), float64 (below 2**53) and the int64 fallback beyond."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream.ops_common import Kernel
from ethosu_stream.ops_conv import _conv_sums, _Weights


def _weights(w: np.ndarray, depthwise: bool) -> _Weights:
    return _Weights.of(w, depthwise)


def _brute(x, w, k, oh, ow, depthwise):
    out = np.zeros((oh, ow, w.shape[0]), object)
    for oy in range(oh):
        for ox in range(ow):
            for o in range(w.shape[0]):
                s = 0
                for ky in range(k.height):
                    for kx in range(k.width):
                        iy = oy * k.stride_y + ky * k.dilation_y
                        ix = ox * k.stride_x + kx * k.dilation_x
                        if depthwise:
                            s += int(x[iy, ix, o]) * int(w[o, ky, kx, 0])
                        else:
                            s += sum(int(a) * int(b) for a, b in zip(x[iy, ix], w[o, ky, kx]))
                out[oy, ox, o] = s
    return out


@settings(max_examples=60, deadline=None)
@given(st.data(), st.booleans(), st.sampled_from([255, 1 << 12, 1 << 15, 1 << 40]))
def test_sums_are_exact(data, depthwise, magnitude):
    """int8-sized inputs take float32, 2**12 to 2**15 float32 or float64 (by depth), 2**40
    (past 2**53 with the weights) the int64 path; all equal the sums in Python integers."""
    kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    sy, sx, dy, dx = (data.draw(st.integers(1, 2)) for _ in range(4))
    oh, ow = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    cin = data.draw(st.integers(1, 20))
    cout = cin if depthwise else data.draw(st.integers(1, 9))
    k = Kernel(kh, kw, sy, sx, dy, dx, False)
    span = ((oh - 1) * sy + (kh - 1) * dy + 1, (ow - 1) * sx + (kw - 1) * dx + 1)
    rs = np.random.RandomState(data.draw(st.integers(0, 2**31 - 1)))
    x = rs.randint(-magnitude, magnitude + 1, span + (cin,), dtype=np.int64)
    w = rs.randint(-255, 256, (cout, kh, kw, 1 if depthwise else cin), dtype=np.int64)
    got = _conv_sums(x, _weights(w, depthwise), k, (oh, ow), depthwise)
    assert got.dtype == np.int64
    assert (got.astype(object) == _brute(x, w, k, oh, ow, depthwise)).all()
