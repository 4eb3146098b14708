"""The suite's Hypothesis profile (tests/conftest.py): fixed examples unless asked otherwise."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DERANDOMIZED, EXPLORE, HYPOTHESIS_PROFILE_VAR

ROOT = Path(__file__).resolve().parents[1]


def test_the_default_profile_draws_the_same_examples_and_stores_none():
    if os.environ.get(HYPOTHESIS_PROFILE_VAR) == EXPLORE:
        assert not settings.default.derandomize
        return
    assert settings.default.derandomize
    assert settings.default.database is None


def test_two_runs_draw_the_same_examples():
    if not settings.default.derandomize:
        pytest.skip(f"{HYPOTHESIS_PROFILE_VAR}={EXPLORE} draws new examples on purpose")
    drawn: list[list[int]] = []

    @settings(max_examples=20)
    @given(st.integers())
    def record(v):
        drawn[-1].append(v)

    for _ in range(2):
        drawn.append([])
        record()
    assert drawn[0] == drawn[1]


def test_an_unknown_profile_is_one_error_naming_the_choices():
    value = "random"
    env = dict(os.environ, **{HYPOTHESIS_PROFILE_VAR: value})
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co",
         "tests/test_hypothesis_profile.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    err = run.stdout + run.stderr
    assert f"{HYPOTHESIS_PROFILE_VAR}={value!r}" in err
    assert repr(EXPLORE) in err and repr(DERANDOMIZED) in err
    assert "Traceback" not in err
