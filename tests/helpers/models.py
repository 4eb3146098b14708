"""Where the shipped models are: ``TVM_ETHOS_MODELS``, else ``../shared/models`` beside the
repository (the one place that resolves it; tests get it as the ``models_dir`` fixture)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODELS_DIR = Path(os.environ.get("TVM_ETHOS_MODELS", REPO.parent / "shared" / "models"))


def model_path(name: str) -> Path:
    """The shipped model ``name`` (no suffix); skips the test where it is not there."""
    p = MODELS_DIR / f"{name}.tflite"
    if not p.exists():
        pytest.skip(f"model {p} not available (set TVM_ETHOS_MODELS)")
    return p
