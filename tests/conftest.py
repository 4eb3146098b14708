"""Fixtures every test directory shares."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.models import MODELS_DIR


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """The folder of shipped models (tests/helpers/models.py says where it is looked for)."""
    return MODELS_DIR
