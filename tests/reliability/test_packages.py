"""Packages and cache entries that cannot crash or lie (issue 25).

A package is verified before any of its native code runs (tvm_ethos/package.py): every member
against the manifest's size and SHA-256, then ``meta.json`` and ``program.json`` against their
schema, then the shared library is loaded. One small model is compiled once for the module
(``ethos-u,llvm``, ~2 s) and its package is damaged or tampered with in the ways issue 25
reported; ``test_package_fuzz_campaign`` runs the mutation corpus of
``tests/reliability/package_mutator.py`` through ``tvm_ethos.load`` and through ``compile``'s
cache in the crash-isolated fuzz harness (``TVM_ETHOS_PACKAGE_FUZZ_CASES`` /
``TVM_ETHOS_FUZZ_CAMPAIGN`` to change; ``benchmarks/fuzz_packages.py`` is the long run).
"""
from __future__ import annotations

import ctypes
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.reliability.fuzz_harness import ROOT, run_campaign
from tests.reliability.package_mutator import (
    MUTATORS,
    SEEDS_ENV,
    TARGET,
    container,
    make_seeds,
    manifest_for,
)
from tvm_ethos import cli
from tvm_ethos.package_meta import parse_meta
from tvm_ethos.runtime import cache as model_cache
from tvm_ethos.runtime.program import NetworkProgram
from tvm_ethos.schema import SchemaError

CAMPAIGN = int(os.environ.get("TVM_ETHOS_FUZZ_CAMPAIGN", "0"))
CASES = int(os.environ.get("TVM_ETHOS_PACKAGE_FUZZ_CASES", "800"))
SAVE = os.environ.get("TVM_ETHOS_FUZZ_SAVE", str(ROOT / "out" / "fuzz-failures"))


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Path:
    return Path(make_seeds(str(tmp_path_factory.mktemp("package-seeds"))))


def _members(path) -> list[tuple[str, bytes]]:
    data = Path(path).read_bytes()
    if data.startswith(b"PK"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return [(n, z.read(n)) for n in z.namelist()]
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def _forge(seeds: Path, out: Path, tar: bool = False, consistent: bool = True, **changes):
    """The seed package with members replaced (``meta_json=`` a dict is dumped, bytes as
    given), its manifest rewritten to match when ``consistent`` (someone who rewrote the whole
    package) or kept (damage: only the manifest can tell)."""
    members = []
    for name, data in _members(seeds / "seed.tvmethos"):
        new = changes.get(name.replace(".", "_"), data)
        members.append((name, json.dumps(new).encode() if isinstance(new, dict) else new))
    if consistent:
        members = [(n, manifest_for(members) if n == "manifest.json" else d)
                   for n, d in members]
    out.write_bytes(container(members, tar))
    return out


def _json(seeds: Path, name: str) -> dict:
    return json.loads(dict(_members(seeds / "seed.tvmethos"))[name])


def _one_line_error(capsys, argv) -> str:
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# -------------------------------------------------------------------------- the fuzz campaign
def test_package_fuzz_campaign(seeds, monkeypatch):
    """Damaged and tampered packages through load and the cache: no crash, hang (10 s a case),
    traceback, left-over folder or memory growth, and no package that loads with its seed's
    members gives another output; only a package whose manifest was rewritten to match may
    load with other members (it runs too: its output is its author's, not checked)."""
    monkeypatch.setenv(SEEDS_ENV, str(seeds))
    report = run_campaign(CASES, campaign=CAMPAIGN, workers=2, corpus="package",
                          targets="package,cache", case_timeout=10.0,
                          save_dir=os.path.join(SAVE, f"package-c{CAMPAIGN}"))
    print("\n" + report.summary())
    assert not report.failures, report.summary()
    assert report.cases == CASES, report.summary()
    for target, refused in (("package", "ModelLoadError"), ("cache", "recompiled")):
        c = report.counts[target]
        assert sum(c.values()) == CASES
        assert c["ok"] > 0.02 * CASES and c["tampered"] > 0 and c[refused] > 0.5 * CASES, c
    reached = {k.split(":", 1)[1] for k in report.by_mutator}
    assert set(MUTATORS) <= reached, set(MUTATORS) - reached
    for key, outcomes in report.by_mutator.items():
        if not key.endswith(":json-consistent"):
            assert "tampered" not in outcomes, (key, dict(outcomes))


# ------------------------------------------------------------------ the cases of issue 25
def test_library_cut_in_half_is_one_line_and_leaves_nothing(seeds, tmp_path):
    """Was: SIGBUS (exit 135), no message, a tvm_ethos_load_* folder left in /tmp."""
    data = (seeds / "seed.tar").read_bytes()
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        so = t.getmember("model.so")
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[:so.offset_data + so.size // 2])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "tvm_ethos", "run", str(cut), "--no-progress"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.count("\n") == 1 and "damaged compiled model" in res.stderr, res.stderr
    assert list(scratch.iterdir()) == []


def test_library_code_never_runs_before_the_metadata_is_checked(seeds, tmp_path):
    """Was: the library was dlopened (its constructors run) before meta.json was found to lack
    ``inputs`` (then a KeyError)."""
    marker = tmp_path / "constructor-ran"
    src = tmp_path / "ctor.c"
    src.write_text('#include <stdio.h>\n__attribute__((constructor)) static void ran(void) '
                   f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    lib = tmp_path / "ctor.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    meta = _json(seeds, "meta.json")
    del meta["inputs"]
    pkg = _forge(seeds, tmp_path / "ctor.tvmethos", model_so=lib.read_bytes(), meta_json=meta)
    with pytest.raises(tvm_ethos.ModelLoadError, match=r"meta.json: missing field 'inputs'"):
        tvm_ethos.load(pkg)
    assert not marker.exists()
    ctypes.CDLL(str(lib))          # the control: loading the library does run its constructor
    assert marker.exists()


@pytest.mark.parametrize("tar", [False, True])
def test_flipped_constants_are_refused(seeds, tmp_path, tar, capsys):
    """Was: a different output and exit status 0."""
    blob = bytearray(dict(_members(seeds / "seed.tvmethos"))["constants.bin"])
    blob[7] ^= 0x10
    pkg = _forge(seeds, tmp_path / ("m.tar" if tar else "m.tvmethos"), tar=tar,
                 consistent=False, constants_bin=bytes(blob))
    with pytest.raises(tvm_ethos.ModelLoadError, match="constants.bin does not match its SHA"):
        tvm_ethos.load(pkg)
    _one_line_error(capsys, ["run", str(pkg), "--no-progress"])


def _edit(path: str, value):
    def apply(doc):
        keys = path.split("/")
        node = doc
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = int(keys[-1]) if isinstance(node, list) else keys[-1]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
        return doc
    return apply


_DELETE = object()
_PAYLOAD = "payloads/tvm_ethos_ethos_u_sg0"
TAMPERED = [
    ("meta.json", _edit("inputs", _DELETE), r"meta.json: missing field 'inputs'"),
    ("meta.json", _edit("inputs", "x"), r"meta.json.inputs: a JSON list, got a string"),
    ("meta.json", _edit("inputs/0/1", [1, 8, 8, 4, 2**24, 2**24]),
     r"meta.json.inputs\[0\]: a 1x8x8x4x16777216x16777216 int8 tensor is .* more than the "
     r"2,147,483,648"),
    ("meta.json", _edit("inputs/0/2", "int7"), r"meta.json.inputs\[0\]\[2\]: one of bool"),
    ("meta.json", _edit("outputs/0/1", [1, 8, 8, 5]),
     r"meta.json.outputs\[0\]: 1x8x8x5 int8, but program.json's tensor 1 is 1x8x8x6 int8"),
    ("meta.json", _edit("targets", None), r"meta.json.targets: a string, got null"),
    ("meta.json", _edit("runtime_options", {"npu_runtime": "gpu"}),
     r"meta.json.runtime_options: option 'npu_runtime': bad value 'gpu'"),
    ("meta.json", _edit("report", "{not json"), r"meta.json.report \(JSON text\): not valid"),
    ("program.json", _edit("tensors/0", [0, "t0", [1, 8, 8, 4]]),
     r"program.json.tensors\[0\]: a list of 4, got 3"),
    ("program.json", _edit("subgraphs/0/steps/0/1/1/1", 9),
     r"program.json.subgraphs\[0\].steps\[0\]\[1\]\[1\]\[1\]: constant 9 is not in "
     r"program.json.constants \(4 of them\)"),
    ("program.json", _edit("subgraphs/0/inputs/0", 7),
     r"program.json.subgraphs\[0\].inputs\[0\]: tensor id 7 is not in program.json.tensors"),
    ("program.json", _edit("constants/1/0", 4096),
     r"program.json.constants\[1\]\[0\]: offset 4096: a constant starts at the first 64 B "
     r"aligned offset after the one before it, here 256"),
    ("program.json", _edit("constants/3/2", [600]), r"past the end of constants.bin"),
    ("program.json", _edit("subgraphs/0/steps/0/2", []),
     r"program.json.subgraphs\[0\].outputs: tensor 1 is not written by any of its steps"),
    ("program.json", _edit("subgraphs/0/steps/0/1/0/1", 1),
     r"program.json.subgraphs\[0\].steps\[0\]: reads tensor 1 before anything writes it"),
    ("program.json", _edit("subgraphs/0/kind", "gpu"),
     r"program.json.subgraphs\[0\].kind: one of npu, host, got 'gpu'"),
    ("program.json", _edit("version", 9), r"program version 9, this tvm-ethos reads 1"),
    ("program.json", _edit("states", [0]),
     r"program.json.states: states in a version-1 program \(they came with version 2\)"),
    ("program.json", lambda doc: _edit("states", [9])(_edit("version", 2)(doc)),
     r"program.json.states\[0\]: state 9 is not in program.json.constants \(4 of them\)"),
    ("program.json", _edit(f"{_PAYLOAD}/flash", "not base64!"), r"\.flash: base64 data"),
    ("program.json", _edit(f"{_PAYLOAD}/driver_payload", "\x80"),
     r"\.driver_payload: base64 data"),
    ("program.json", _edit(f"{_PAYLOAD}/scratch_bytes", 16),
     r"\.inputs\[0\]: lies outside the 16 B scratch arena"),
    ("program.json", _edit(f"{_PAYLOAD}/extra", 1), r"unknown field 'extra'"),
]


@pytest.mark.parametrize("member, edit, words", TAMPERED,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(TAMPERED)])
def test_tampered_metadata_is_one_line_naming_the_field(seeds, tmp_path, member, edit, words):
    """Was: KeyError, AttributeError, TypeError, IndexError, MemoryError (9.09 TiB). The
    manifest is rewritten to match, so the schema alone must refuse the edit."""
    doc = edit(_json(seeds, member))
    pkg = _forge(seeds, tmp_path / "m.tvmethos", **{member.replace(".", "_"): doc})
    with pytest.raises(tvm_ethos.ModelLoadError, match=words) as err:
        tvm_ethos.load(pkg)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{pkg}: invalid ")


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3), max_leaves=6)


def _paths(doc, path=()):
    yield path
    children = (doc.items() if isinstance(doc, dict) else
                enumerate(doc) if isinstance(doc, list) else ())
    for k, v in children:
        yield from _paths(v, path + (k,))


@pytest.fixture(scope="module")
def seed_members(seeds) -> dict:
    return dict(_members(seeds / "seed.tvmethos"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_schema_refuses_any_edit_with_one_error_or_takes_it(seed_members, data):
    """Any JSON value put at any place of meta.json or program.json: the parse gives a
    description or one SchemaError line naming the member, never another exception."""
    member = data.draw(st.sampled_from(["meta.json", "program.json"]))
    doc = json.loads(seed_members[member])
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(_JSON_VALUES)
    text = json.dumps(doc).encode()
    blob = seed_members["constants.bin"]
    try:
        parse_meta(text) if member == "meta.json" else NetworkProgram.from_json(text, blob)
    except SchemaError as err:
        assert str(err).startswith(member) and "\n" not in str(err), err


def test_tvmc_run_refuses_bad_packages_in_one_line(seeds, tmp_path, capsys):
    fifo = tmp_path / "fifo.tar"
    os.mkfifo(fifo)
    assert "not a regular file" in _one_line_error(capsys, ["run", str(fifo), "--no-progress"])
    old = tmp_path / "old.tar"
    meta = dict(_json(seeds, "meta.json"), format_version=1)
    old.write_bytes(container([(n, json.dumps(meta).encode() if n == "meta.json" else d)
                               for n, d in _members(seeds / "seed.tar")
                               if n != "manifest.json"], tar=True))
    assert "package format 1 is older than this tvm-ethos (2): recompile" in _one_line_error(
        capsys, ["run", str(old), "--no-progress"])
    assert "is a directory" in _one_line_error(capsys, ["run", str(tmp_path), "--no-progress"])
    # the control: the intact seed runs
    assert cli.main(["run", str(seeds / "seed.tar"), "--no-progress"]) == 0
    assert "output 0: 1x8x8x6 int8" in capsys.readouterr().out


def test_a_library_that_fails_to_load_leaves_nothing(seeds, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    pkg = _forge(seeds, tmp_path / "m.tvmethos", model_so=b"\x7fELF not really")
    with pytest.raises(tvm_ethos.ModelLoadError, match="cannot load the executable"):
        tvm_ethos.load(pkg)
    assert [p.name for p in tmp_path.iterdir()] == ["m.tvmethos"]


# ------------------------------------------------------------------------------- the cache
@pytest.fixture
def cached(seeds, tmp_path):
    """A cache directory holding the seed model's entry: (model bytes, cache dir, entry)."""
    model = (seeds / "model.tflite").read_bytes()
    d = tmp_path / "cache"
    cm = tvm_ethos.compile(model, target=TARGET, cache_dir=d)
    return model, d, Path(cm.cache_path)


def _alarm(seconds: int):
    def on_alarm(signum, frame):
        raise TimeoutError(f"no answer in {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    return old


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_cache_entry_that_is_no_regular_file_is_refused(cached, kind):
    """Was: a FIFO hung compile in open(); a directory gave IsADirectoryError."""
    model, d, entry = cached
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    else:
        entry.mkdir()
    old = _alarm(10)
    try:
        with pytest.raises(model_cache.CacheError, match="is not a regular file; remove it"):
            tvm_ethos.compile(model, target=TARGET, cache_dir=d)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_cache_dir_naming_a_file_is_one_line(seeds, tmp_path, monkeypatch, capsys):
    """Was: FileExistsError from os.makedirs."""
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("")
    monkeypatch.setenv(model_cache.CACHE_ENV_VAR, str(not_a_dir))
    err = _one_line_error(capsys, ["compile", str(seeds / "model.tflite"), "--target", TARGET,
                                   "-o", str(tmp_path / "m.tar"), "--no-progress"])
    assert f"{not_a_dir} (cache_dir or $TVM_ETHOS_CACHE_DIR) is not a directory" in err
    assert not (tmp_path / "m.tar").exists()


def test_a_valid_hash_entry_without_inputs_is_compiled_again(seeds, cached):
    """Was: a KeyError traceback. The entry's hash is right (rewritten with the package), its
    manifest too: the schema refuses it, and the cache treats it as damage."""
    model, d, entry = cached
    meta = _json(seeds, "meta.json")
    del meta["inputs"]
    forged = _forge(seeds, d.parent / "forged.tvmethos", meta_json=meta).read_bytes()
    entry.write_bytes(model_cache.entry_bytes(forged))
    with pytest.warns(model_cache.CacheWarning, match="meta.json: missing field 'inputs'"):
        again = tvm_ethos.compile(model, target=TARGET, cache_dir=d)
    assert not again.from_cache
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hit = tvm_ethos.compile(model, target=TARGET, cache_dir=d)
    assert hit.from_cache
    x = np.load(seeds / "x.npy")
    assert np.array_equal(hit.run(x)[0], np.load(seeds / "ref.npy"))
