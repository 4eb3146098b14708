"""tvmc keeps Python's cyclic collector off while it builds its parser, and compile from the
start of the subcommand to its end; what it made leaves the pause in the collector's oldest
generation, so the first young collection after it does not walk the whole compile's objects
(a caller's frozen objects stay frozen)."""
from __future__ import annotations

import gc

import pytest

from tvm_ethos import cli, cli_compile
from tvm_ethos.cli import collector_paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def test_what_the_block_made_leaves_it_in_the_oldest_generation(collector_on):
    with collector_paused():
        made = [[k] for k in range(2000)]
    young = {id(o) for o in gc.get_objects(generation=0)}
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert gc.isenabled()
    assert not any(id(x) in young for x in made)
    assert all(id(x) in oldest for x in made)


def test_a_callers_frozen_objects_stay_frozen(collector_on):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            made = [[k] for k in range(100)]
        assert gc.get_freeze_count() == frozen
        oldest = {id(o) for o in gc.get_objects(generation=2)}
        assert not any(id(x) in oldest for x in made)   # nothing promoted
    finally:
        gc.unfreeze()


def test_compile_runs_with_the_collector_off_from_its_first_check(collector_on, monkeypatch):
    seen = []
    monkeypatch.setattr(cli_compile, "_run", lambda args: seen.append(gc.isenabled()) or 0)
    assert cli_compile.run(object()) == 0
    assert seen == [False] and gc.isenabled()


def test_tvmc_builds_its_parser_with_the_collector_off(collector_on, monkeypatch):
    """Building the parser imports the subcommand's modules (for compile, every built-in
    backend's): no collections walk what they make."""
    seen = []
    build = cli.build_parser
    monkeypatch.setattr(cli, "build_parser",
                        lambda command=None: seen.append(gc.isenabled()) or build(command))
    assert cli.main(["plan", "--help"]) == 0
    assert seen == [False] and gc.isenabled()
