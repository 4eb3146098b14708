"""RESIZE_BILINEAR on int8: TFLite's fixed-point kernel (10-bit coordinates) reproduced bit for
bit in every coordinate mode, and each NPU's resize constraints.

The oracle is the reference resolver (conftest.oracle); the builtin kernels agree, XNNPack's
float interpolation does not (it differs by one on a few elements) and is not the oracle."""
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact

import tvm_ethos
from tvm_ethos.emulator.part_matchers import match_subgraph
from tvm_ethos.partition import partition
from tvm_ethos.pipeline.npu_subgraphs import lower_npu_subgraphs

CASES = {
    "2x_asymmetric": dict(),
    "2x_half_pixel": dict(in_shape=(1, 3, 5, 2), size=(6, 10), half_pixel=True),
    "align_corners_2n-1": dict(size=(7, 7), align_corners=True),
    "4x": dict(in_shape=(1, 2, 3, 5), size=(8, 12)),
    "downscale_host": dict(in_shape=(1, 5, 3, 4), size=(2, 7)),
}
ON = {  # where each case goes: (ethos-u, ethos-n)
    "2x_asymmetric": ("ethos-u", "ethos-n"),
    "2x_half_pixel": ("ethos-u", "ethos-n"),
    "align_corners_2n-1": ("ethos-u", "ethos-n"),
    "4x": ("ethos-u", "llvm"),
    "downscale_host": ("llvm", "llvm"),
}


@pytest.mark.parametrize("target", ["ethos-u,llvm", "ethos-n,llvm", "llvm"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_resize_bilinear_bit_exact(case, target):
    model = tb.resize_bilinear(**CASES[case])
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    want = "llvm" if target == "llvm" else ON[case][target.startswith("ethos-n")]
    assert cm.partition_summary == {want: 1}, cm.partition_report
    (op,) = cm.partition_report.operators
    assert op.via == ("kernel" if want == "llvm" else "npu")
    assert_bit_exact(cm, model, n_inputs=3, seed=5)


def _reasons(model, target):
    (op,) = tvm_ethos.partition_report(tvm_ethos.load_model(model), target).operators
    return op.rejections.get(target.split(",")[0], [])


def test_resize_constraints():
    assert _reasons(tb.resize_bilinear(**CASES["downscale_host"]), "ethos-u,llvm") == [
        "resize 5x3 -> 2x7 (align_corners=False); the scale must be 1x/2x/4x/8x, "
        "equal for height and width"
    ]
    assert _reasons(
        tb.resize_bilinear(in_shape=(1, 2, 2, 3), size=(8, 8), half_pixel=True), "ethos-u,llvm"
    ) == ["half-pixel centres with 2x2 -> 8x8; only a 2x scale (or a 1x1 input)"]
    assert _reasons(tb.resize_bilinear(**CASES["4x"]), "ethos-n,llvm") == [
        "resize 2x3 -> 8x12; Ethos-N resizes to 2n or 2n-1"]
    assert _reasons(tb.resize_bilinear(in_shape=(1, 4, 4, 3), size=(8, 7)), "ethos-n,llvm") == [
        "resize to 8x7; Ethos-N needs height and width both odd or both even"]


def test_resize_with_requantization_is_not_the_integer_kernel():
    """TFLite's int8 kernel interpolates codes; a resize that also requantizes is left to TVM."""
    model = tb.resize_bilinear(q=(0.05, 3), out_q=(0.1, -2))
    rep = tvm_ethos.partition_report(tvm_ethos.load_model(model), "ethos-u,llvm")
    (op,) = rep.operators
    assert (op.placed_on, op.via) == ("llvm", "tvm")
    assert any("needs them equal" in r for r in op.rejections["ethos-u"])


def test_resize_part():
    model = tb.resize_bilinear(**CASES["2x_half_pixel"])
    (lw,) = lower_npu_subgraphs(partition(tvm_ethos.load_model(model), "ethos-u,llvm")[0]).values()
    (mp,) = match_subgraph(lw).parts
    p = mp.part
    assert (
        p.kind == "resize"
        and dict(p.attrs)["scale"] == (2, 2)
        and dict(p.attrs)["method"] == "bilinear"
    )
    assert p.output.shape == (1, 6, 10, 2)
    # any output row may read any input row: the whole (3, 5) input map for one output element
    assert tuple(p.propagators[0].apply_shape((1, 1, 1, 2))) == (1, 3, 5, 2)
