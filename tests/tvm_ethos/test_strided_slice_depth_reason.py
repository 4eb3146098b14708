"""A STRIDED_SLICE with a stride over the depth on the tflite-micro host (issue 28): the
Ethos-U strides over height or width only (as Vela 5.2, which leaves it on the CPU too), so
it stays a TFLite operator, and its reason is the Ethos-U's own rejection, not the export's
count of host operators by kind (the importer's slice is a SPLIT there, which the source
does not have)."""
from __future__ import annotations

import numpy as np
import pytest

import tvm_ethos
from benchmarks.vela_superset_audit import _strided_slice_depth
from tvm_ethos.backends.tflite_micro.reference import TflmReference

pytest.importorskip("tflite_micro")


def test_a_stride_over_the_depth_stays_a_tflite_operator_with_the_ethos_us_reason():
    model = _strided_slice_depth()
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert (placed.kind, placed.placed_on) == ("STRIDED_SLICE", "tflite-micro")
    assert "a slice with stride 2 along axis 3" in placed.why, placed.why
    assert "height or width only" in placed.why and "SPLIT" not in placed.why, placed.why
    x = np.random.RandomState(0).randint(-128, 128, (1, 4, 4, 8)).astype(np.int8)
    (want,) = TflmReference(model).run([x])
    np.testing.assert_array_equal(np.asarray(cm.run(x)[0]).reshape(want.shape), want)
