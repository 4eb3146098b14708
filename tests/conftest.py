"""Fixtures every test directory shares, and the Hypothesis profiles.

The suite runs Hypothesis derandomized: every run draws the same examples, so CI fails only on
what the code changed, never on an old bug a fresh draw happened to find. Bug hunting is
opt-in: ``TVM_ETHOS_HYPOTHESIS=explore`` draws new examples each run (and honours pytest's
``--hypothesis-seed``), keeping failures in the local example database to replay them."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from tests.helpers.models import MODELS_DIR
from tests.helpers.stable_ids import ids_with_an_address, unstable_ids_error

#: the environment variable that picks the Hypothesis profile, and its values
HYPOTHESIS_PROFILE_VAR = "TVM_ETHOS_HYPOTHESIS"
DERANDOMIZED, EXPLORE = "derandomized", "explore"

# Tests keep their own deadline and max_examples; a profile only decides where the examples
# come from and whether they are remembered.
settings.register_profile(DERANDOMIZED, derandomize=True, database=None)
settings.register_profile(EXPLORE, derandomize=False)


def _hypothesis_profile() -> str:
    name = os.environ.get(HYPOTHESIS_PROFILE_VAR, DERANDOMIZED) or DERANDOMIZED
    if name not in (DERANDOMIZED, EXPLORE):
        raise pytest.UsageError(
            f"{HYPOTHESIS_PROFILE_VAR}={name!r} is not a Hypothesis profile of this suite; set it "
            f"to {EXPLORE!r} to draw new examples, or {DERANDOMIZED!r} (the default) or unset it "
            "for the fixed ones")
    return name


def pytest_configure(config: pytest.Config) -> None:
    """Load the profile before any test module is collected."""
    settings.load_profile(_hypothesis_profile())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse ids that differ between processes, serial runs too (tests/helpers/stable_ids)."""
    unstable = ids_with_an_address(item.nodeid for item in items)
    if unstable:
        raise pytest.UsageError(unstable_ids_error(unstable))


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """The folder of shipped models (tests/helpers/models.py says where it is looked for)."""
    return MODELS_DIR
