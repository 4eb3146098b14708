"""Bad input gives a clear tvm-ethos error naming the problem, never a raw TVM traceback."""
import numpy as np
import pytest
import tflite_builder as tb
from conftest import model_path

import tvm_ethos
from tvm_ethos.errors import (
    ModelLoadError,
    OptionError,
    TargetError,
    TvmEthosError,
    UnsupportedModelError,
)


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
