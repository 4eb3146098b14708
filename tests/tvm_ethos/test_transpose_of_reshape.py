"""A model's own TRANSPOSE of a RESHAPE's output: Relax reads it as a ``permute_dims`` of a
``reshape``, as it reads an importer's operator written so, and the partition ties such a
permutation to its reshape unless the source shows it is the model's own (as many TRANSPOSEs
of a RESHAPE of its form as ``main`` has permutations of a reshape of it:
``partition_chains.source_pairs``). Was: every TRANSPOSE of a RESHAPE went to the host, so a
model with another TRANSPOSE on the NPU could not be written ("which is which cannot be told
from the source") and stayed on TFLite Micro whole. Where a kind still runs on both sides,
the refusal names why the Ethos-U rejects the host's and what to change."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from test_tflite_export import _conv_on_both_sides
from tflite_builder import BO, T
from tvm import relax

import tvm_ethos
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle
from tvm_ethos.errors import UnsupportedModelError
from tvm_ethos.partition_chains import chain_verdict
from tvm_ethos.tflite_source import SOURCE_ATTR

pytest.importorskip("tflite_micro")

Q = dict(scale=0.05, zp=3)


def _i32(values) -> T:
    a = np.asarray(values, np.int32)
    return T(list(a.shape), "int32", data=a)


def transposes_around_a_reshape(shape=(1, 4, 6, 8), perm=(0, 2, 1, 3), reshaped=None) -> bytes:
    """x -> TRANSPOSE -> RESHAPE (to ``reshaped``, default the input's shape) -> TRANSPOSE:
    two TRANSPOSEs of one form, the second of a RESHAPE's output."""
    mid = [shape[p] for p in perm]
    reshaped = list(reshaped or shape)
    out = [reshaped[p] for p in perm]
    tensors = [T(list(shape), "int8", **Q), _i32(perm), T(mid, "int8", **Q), _i32(reshaped),
               T(reshaped, "int8", **Q), T(out, "int8", **Q)]
    ops = [(BO.TRANSPOSE, 0, None, [0, 1], [2]), (BO.RESHAPE, 0, None, [2, 3], [4]),
           (BO.TRANSPOSE, 0, None, [4, 1], [5])]
    return tb.serialize(tensors, ops, [0], [5])


@pytest.mark.parametrize("shape, perm, reshaped", [
    ((1, 4, 6, 8), (0, 2, 1, 3), None),
    ((1, 3, 5, 4), (0, 3, 1, 2), (1, 5, 3, 4)),
])
def test_a_models_transpose_of_a_reshape_runs_on_the_npu_as_tflite_micro(shape, perm, reshaped):
    data = transposes_around_a_reshape(shape, perm, reshaped)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"] * 3, cm.placement
    xs = inputs_for(cm.inputs, np.random.RandomState(4))
    (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_without_its_source_the_permutation_stays_tied_and_the_file_names_what_to_change(
        tmp_path):
    """Without the .tflite a permutation of a reshape may be an importer's operator: it stays
    tied (on the host), so a package whose other TRANSPOSE is on the NPU cannot be written
    with host operators; the refusal says what would let it."""
    data = transposes_around_a_reshape()
    mod = tvm_ethos.load_model(data)
    tied = chain_verdict(relax.transform.ConvertToDataflow()(mod))
    bare = chain_verdict(relax.transform.ConvertToDataflow()(mod.without_attr(SOURCE_ATTR)))
    assert len(tied.own) == 1 and not bare.own, (tied, bare)
    cm = tvm_ethos.compile(mod.without_attr(SOURCE_ATTR), "ethos-u,llvm", cache_dir=False)
    assert cm.partition_summary == {"ethos-u": 2, "llvm": 1}, cm.partition_summary
    with pytest.raises(UnsupportedModelError) as err:
        cm.export_tflite(tmp_path / "m.tflite", model=data)
    msg = str(err.value)
    assert "1 of the source's 2 TRANSPOSE operators run on the host" in msg, msg
    assert "takes every TRANSPOSE or none" in msg and "\n" not in msg, msg


def test_a_kind_on_both_sides_is_refused_naming_why_the_ethos_u_rejects_its_host_ones(
        tmp_path):
    cm = tvm_ethos.compile(_conv_on_both_sides(), "ethos-u,llvm", cache_dir=False)
    with pytest.raises(UnsupportedModelError) as err:
        cm.export_tflite(tmp_path / "m.tflite")
    msg = str(err.value)
    assert "1 of the source's 2 CONV_2D operators run on the host and the rest on the " \
        "Ethos-U (the Ethos-U rejects strides 4x4; stride values must be in the range " \
        "[1, 3])" in msg, msg
    assert "takes every CONV_2D or none" in msg, msg
