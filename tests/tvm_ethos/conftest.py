"""The TVM side's tests import these by bare name (``from conftest import oracle``; pytest.ini
puts tests/tvm_ethos on the path); they live in tests/helpers."""
from __future__ import annotations

from tests.helpers.models import MODELS_DIR as MODELS
from tests.helpers.models import model_path
from tests.helpers.tflite_oracle import assert_bit_exact, oracle, random_inputs

__all__ = ["MODELS", "assert_bit_exact", "model_path", "oracle", "random_inputs"]
