"""Bad input gives a clear tvm-ethos error naming the problem, never a raw TVM traceback."""
import numpy as np
import pytest
import tflite_builder as tb
import tvm
from conftest import model_path
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import (
    tflm_accepts,
    tflm_oracle,
    tflm_random_inputs,
    tflm_verdicts,
)
from tests.reliability.tflite_mutator import _captured, _copy_t
from tvm_ethos.errors import (
    ModelLoadError,
    OptionError,
    TargetError,
    TvmEthosError,
    UnsupportedModelError,
)
from tvm_ethos.tflite_source import SOURCE_ATTR


def test_not_a_model(tmp_path):
    p = tmp_path / "junk.tflite"
    p.write_bytes(b"this is certainly not a flatbuffer model" * 10)
    with pytest.raises(ModelLoadError, match="not a TFLite flatbuffer"):
        tvm_ethos.load_model(p)
    q = tmp_path / "junk.bin"
    q.write_bytes(b"\x00\x01\x02garbage")
    with pytest.raises(ModelLoadError, match="not a recognised model file"):
        tvm_ethos.load_model(q)


def test_empty_and_missing(tmp_path):
    p = tmp_path / "empty.tflite"
    p.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty"):
        tvm_ethos.load_model(p)
    with pytest.raises(ModelLoadError, match="not found"):
        tvm_ethos.load_model(tmp_path / "nope.tflite")


@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.95])
def test_truncated(tmp_path, fraction):
    data = model_path("ds_cnn_kws").read_bytes()
    p = tmp_path / "cut.tflite"
    p.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ModelLoadError, match="truncated"):
        tvm_ethos.load_model(p)


def test_float_model_on_npus():
    mod = tvm_ethos.load_model(tb.float_conv(np.random.RandomState(0)))
    for target in ("ethos-u,llvm", "ethos-n,llvm"):
        with pytest.raises(UnsupportedModelError, match="float32 model"):
            tvm_ethos.compile(mod, target=target)
    # the host alone takes it
    cm = tvm_ethos.compile(mod, target="llvm")
    out = cm.run(np.ones((1, 8, 8, 3), np.float32))[0]
    assert out.shape == (1, 8, 8, 4)


def test_unknown_target():
    mod = tvm_ethos.load_model(tb.softmax(np.random.RandomState(0)))
    with pytest.raises(TargetError, match="unknown target 'ethos-x'.*known targets: .*ethos-n"):
        tvm_ethos.compile(mod, target="ethos-x,llvm")


@pytest.mark.parametrize("target", ["ethos-n", "ethos-u,ethos-n", "llvm,ethos-u"])
def test_no_host_target_at_end(target):
    with pytest.raises(TargetError, match="no host target at the end"):
        tvm_ethos.parse_targets(target)


def test_bad_target_lists():
    with pytest.raises(TargetError, match="appears twice"):
        tvm_ethos.parse_targets("ethos-n,ethos-n,llvm")
    with pytest.raises(TargetError, match="more than one host"):
        tvm_ethos.parse_targets("ethos-n,opencl,llvm")
    with pytest.raises(TargetError, match="empty target"):
        tvm_ethos.parse_targets("ethos-n,,llvm")


def test_options_validated_up_front():
    with pytest.raises(OptionError, match=r"'accelerator_config'.*'ethos-u99'.*ethos-u55-128"):
        tvm_ethos.compile(b"not even read", target="ethos-u,llvm", accelerator_config="ethos-u99")
    with pytest.raises(OptionError, match=r"unknown option 'variant'.*allowed options"):
        tvm_ethos.compile(b"x", target="ethos-u,llvm", variant="n78")
    with pytest.raises(OptionError, match="'variant'.*'n77'.*n78"):
        tvm_ethos.parse_targets("ethos-n -variant=n77,llvm")
    tl = tvm_ethos.parse_targets("ethos-u -accelerator_config=ethos-u65-256,llvm")
    assert tl.options_of("ethos-u")["accelerator_config"] == "ethos-u65-256"
    assert tl.ids == ["ethos-u", "llvm"]


def test_errors_share_a_base():
    for cls in (ModelLoadError, UnsupportedModelError, TargetError, OptionError):
        assert issubclass(cls, TvmEthosError)


def test_printed_ops_in_importer_errors_become_their_names():
    """A CONV_2D whose scale count disagrees with its shape makes TVM print a whole
    ``ir.Op(...)`` in the message; the user sees the operator's name."""
    from tvm_ethos.frontend.messages import one_line
    msg = ('Size mismatch: ir.Op(span=None, ty=ir.Type(span=None), name="relax.dequantize", '
           'description="", arguments=(ir.ArgumentInfo(name="data", type_info="Tensor"')
    assert one_line(ValueError(msg)) == "Size mismatch: relax.dequantize"
    full = ('In ir.Op(span=None, name="relax.add", support_level=1), the first input is bad; '
            'Size mismatch: ir.Op(span=None, name="relax.multiply", support_level=1): shapes')
    assert one_line(ValueError(full)) == ("relax.add: the first input is bad; Size mismatch: "
                                          "relax.multiply: shapes")


# ------------------------------------------------------------------ issue 25 item 4 / issue 30
def _conv_variant(change=None, **build_kw):
    """tflite_builder's int8 convolution rebuilt with ``change(tensors)`` applied (tensors:
    input, weights, bias, output) and the build arguments ``build_kw`` replaced."""
    _, (tensors, args, kwargs) = _captured(tb.conv2d, np.random.RandomState(0))
    ts = [_copy_t(tb, t) for t in tensors]
    if change is not None:
        change(ts)
    return tb.build(ts, *args, **dict(kwargs, **build_kw))


def _assert_bit_exact_with_tflm(data, target, n=4):
    cm = tvm_ethos.compile(data, target=target)
    rs = np.random.RandomState(1)
    for _ in range(n):
        xs = tflm_random_inputs(data, rs)
        np.testing.assert_array_equal(cm.run(*xs)[0], tflm_oracle(data, xs)[0])
    return cm


def _strip_bias_quantization(ts):
    ts[2].scale = ts[2].zp = None


@pytest.mark.parametrize("target", ["llvm", "ethos-u,llvm"])
def test_conv_bias_without_quantization_gets_tflites(target):
    """TFLite's runtimes quantize a convolution's INT32 bias by input scale x weight scale and
    never read its own parameters; stripped of them, the model was 1 LSB off TFLite Micro on
    the NPU paths (the operator fell to a float path). Now it stays on the NPU, exact."""
    data = _conv_variant(_strip_bias_quantization)
    cm = _assert_bit_exact_with_tflm(data, target)
    assert set(cm.partition_summary) == {target.split(",")[0]}, cm.partition_summary


def test_conv_without_bias_follows_tflite_micro():
    """TFLite Micro runs an int8 CONV_2D with no bias input (LiteRT's kernel refuses it): it is
    accepted and exact on the NPU."""
    data = _conv_variant(op_inputs=[0, 1])
    assert tflm_verdicts([data]) == ["ok"]
    cm = _assert_bit_exact_with_tflm(data, "ethos-n,llvm")
    assert cm.partition_summary == {"ethos-n": 1}


def _int16_activations(ts):
    """int16 activations with a zero point: TFLite's 16x8 convolution ignores it (its
    converter writes 0), so no exact kernel computes it (zero point 0: test_int16x8.py)."""
    for t in (ts[0], ts[3]):
        t.dtype, t.zp = "int16", np.full(1, 3, np.int64)


@pytest.mark.parametrize("make, words", [
    (lambda: _conv_variant(op_inputs=[0, 1, -1]), ("absent (-1) bias",)),
    (lambda: _conv_variant(lambda ts: setattr(ts[0], "dtype", "float32")),
     ("mixes tensor types", "input 0 FLOAT32", "output 0 INT8")),
    (lambda: _conv_variant(lambda ts: setattr(ts[1], "dtype", "uint8")),
     ("INT8 activations with UINT8 weights",)),
    (lambda: _conv_variant(_int16_activations),
     ("operator 0 (CONV_2D) cannot be imported", "INT16", "ethos-u")),
    (lambda: _conv_variant(lambda ts: setattr(ts[3], "shape", [1, 8, 7, 6])),
     ("declared [1, 8, 7, 6]", "[1, 8, 8, 6]")),
])
def test_content_tflite_cannot_take_is_refused_in_one_line(make, words, monkeypatch):
    """Refused in one line naming what is wrong, never imported into a wrong answer."""
    monkeypatch.setitem(tb._TYPES, "int16", 7)
    monkeypatch.setitem(tb._NP, "int16", np.int16)
    with pytest.raises(UnsupportedModelError) as err:
        tvm_ethos.load_model(make())
    msg = str(err.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


@settings(max_examples=12, deadline=None)
@given(bias_axis=st.integers(-(1 << 31), (1 << 31) - 1),
       act_axis=st.integers(-(1 << 31), (1 << 31) - 1))
def test_quantized_dimension_of_one_scale_or_a_1d_tensor_is_ignored(bias_axis, act_axis):
    """Whatever quantized_dimension a per-tensor activation or a 1-D per-channel bias names,
    TFLite Micro runs the model and it imports to the very module its axis-0 twin gives (the
    axis says nothing there: person_detect's biases name dimension 3)."""
    def axes(ts):
        ts[0].axis, ts[3].axis, ts[2].axis = act_axis, act_axis, bias_axis

    data = _conv_variant(axes)
    assert tflm_accepts(data) == "ok"
    # the same module but for the source each keeps (its bytes' SHA-256)
    tvm.ir.assert_structural_equal(tvm_ethos.load_model(data).without_attr(SOURCE_ATTR),
                                   tvm_ethos.load_model(_conv_variant()).without_attr(SOURCE_ATTR))
