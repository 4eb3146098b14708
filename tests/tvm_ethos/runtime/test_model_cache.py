"""The compiled-model cache (seed 003): a second compile of the same inputs loads from the cache."""
import hashlib
import multiprocessing
import os
import stat
import time
import warnings

import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.cache_writer import store_many
from tvm_ethos.runtime import cache as model_cache


@pytest.fixture
def model():
    return tb.conv2d(np.random.RandomState(5), kernel=(3, 3))


def test_second_compile_loads_from_the_cache(tmp_path, model):
    d = tmp_path / "cache"
    t0 = time.perf_counter()
    first = tvm_ethos.compile(model, target="ethos-u,llvm", cache_dir=d)
    t_first = time.perf_counter() - t0
    assert not first.from_cache and os.path.isfile(first.cache_path)
    assert len(list(d.iterdir())) == 1
    t0 = time.perf_counter()
    second = tvm_ethos.compile(model, target="ethos-u,llvm", cache_dir=d)
    t_second = time.perf_counter() - t0
    assert second.from_cache and second.cache_path == first.cache_path
    assert second.partition_summary == first.partition_summary == {"ethos-u": 1}
    assert_bit_exact(second, model, n_inputs=2)
    assert t_second < t_first  # loading is cheaper than compiling
    # the same model as an IRModule is another key (hashing its JSON), but stable
    mod = tvm_ethos.load_model(model)
    a = tvm_ethos.compile(mod, target="ethos-u,llvm", cache_dir=d)
    b = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-u,llvm", cache_dir=d)
    assert not a.from_cache and b.from_cache and a.cache_path == b.cache_path != first.cache_path


def test_key_covers_targets_options_and_package(tmp_path, model, monkeypatch):
    d = tmp_path / "c"
    base = model_cache.cache_key(
        model, "ethos-u -accelerator_config=ethos-u55-128,llvm", {}, (1, 1)
    )
    assert base == model_cache.cache_key(
        bytes(model), "ethos-u -accelerator_config=ethos-u55-128,llvm", {}, (1, 1)
    )
    assert base != model_cache.cache_key(
        model, "ethos-u -accelerator_config=ethos-u65-256,llvm", {}, (1, 1)
    )
    assert base != model_cache.cache_key(
        model, "ethos-u -accelerator_config=ethos-u55-128,llvm", {"x": 1}, (1, 1)
    )
    assert base != model_cache.cache_key(
        model + b"\0", "ethos-u -accelerator_config=ethos-u55-128,llvm", {}, (1, 1)
    )
    monkeypatch.setattr(model_cache, "_PACKAGE_DIGEST", "tvm-ethos 9.9.9 src x tvm y")
    assert base != model_cache.cache_key(
        model, "ethos-u -accelerator_config=ethos-u55-128,llvm", {}, (1, 1)
    )
    monkeypatch.undo()
    # a different target option compiles again; runtime options do not change the key
    tvm_ethos.compile(model, target="ethos-u,llvm", cache_dir=d)
    other = tvm_ethos.compile(
        model, target="ethos-u,llvm", accelerator_config="ethos-u65-256", cache_dir=d
    )
    assert not other.from_cache
    again = tvm_ethos.compile(model, target="ethos-u,llvm", cache_dir=d, fallback_mode="copy")
    assert again.from_cache and again.runtime_options["fallback_mode"] == "copy"
    assert len(list(d.glob("*.tvmethos"))) == 2


def test_env_var_and_disable(tmp_path, model, monkeypatch):
    monkeypatch.setenv(model_cache.CACHE_ENV_VAR, str(tmp_path / "env"))
    a = tvm_ethos.compile(model, target="llvm")
    b = tvm_ethos.compile(model, target="llvm")
    assert not a.from_cache and b.from_cache
    assert os.path.dirname(b.cache_path) == str(tmp_path / "env")
    c = tvm_ethos.compile(model, target="llvm", cache_dir=False)
    assert not c.from_cache and c.cache_path is None


@pytest.mark.parametrize("damage", ["garbage", "flip a byte", "truncate"])
def test_damaged_entry_is_recompiled_with_a_warning(tmp_path, model, damage):
    d = tmp_path / "c"
    first = tvm_ethos.compile(model, target="llvm", cache_dir=d)
    data = bytearray(open(first.cache_path, "rb").read())
    if damage == "garbage":
        data = b"garbage"
    elif damage == "flip a byte":   # inside the package: only the content hash can tell
        data[len(data) // 2] ^= 0x01
    else:
        data = data[: len(data) - 100]
    with open(first.cache_path, "wb") as f:
        f.write(data)
    with pytest.warns(model_cache.CacheWarning, match="damaged"):
        again = tvm_ethos.compile(model, target="llvm", cache_dir=d)
    assert not again.from_cache
    assert tvm_ethos.compile(model, target="llvm", cache_dir=d).from_cache


def test_entry_carries_the_hash_of_its_package(tmp_path, model):
    d = tmp_path / "c"
    cm = tvm_ethos.compile(model, target="llvm", cache_dir=d)
    data = open(cm.cache_path, "rb").read()
    package = model_cache.verified_package(data)
    assert package is not None and data.endswith(package)
    assert hashlib.sha256(package).hexdigest().encode() in data[: len(data) - len(package)]
    # the cached package is the one save writes, and a cached model saves it again
    hit = tvm_ethos.compile(model, target="llvm", cache_dir=d)
    assert hit.from_cache
    assert open(hit.save(tmp_path / "a.tvmethos"), "rb").read() == package
    assert open(cm.save(tmp_path / "b.tvmethos"), "rb").read() == package


def test_cache_directory_is_private(tmp_path, model):
    d = tmp_path / "new" / "cache"
    tvm_ethos.compile(model, target="llvm", cache_dir=d)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert [p.name for p in d.iterdir() if p.name.startswith(".tmp-")] == []


@pytest.mark.parametrize("what", ["entry", "directory"])
def test_writable_by_others_is_refused(tmp_path, model, what):
    d = tmp_path / "c"
    first = tvm_ethos.compile(model, target="llvm", cache_dir=d)
    os.chmod(first.cache_path if what == "entry" else d, 0o666 if what == "entry" else 0o777)
    with pytest.raises(
        model_cache.CacheError, match=f"cache {what} .* writable by group or others"
    ):
        tvm_ethos.compile(model, target="llvm", cache_dir=d)
    os.chmod(first.cache_path if what == "entry" else d, 0o600 if what == "entry" else 0o700)
    assert tvm_ethos.compile(model, target="llvm", cache_dir=d).from_cache


@pytest.mark.parametrize("what", ["entry", "directory"])
def test_foreign_owned_is_refused(tmp_path, model, monkeypatch, what):
    d = tmp_path / "c"
    tvm_ethos.compile(model, target="llvm", cache_dir=d)
    me = os.getuid()
    if what == "directory":   # we are someone else now: the directory is not ours
        monkeypatch.setattr(model_cache, "_current_uid", lambda: me + 1)
    else:                     # another user's entry in our directory
        stat_of = model_cache._file_stat
        monkeypatch.setattr(model_cache, "_file_stat", lambda f: _with_uid(stat_of(f), me + 1))
    with pytest.raises(
        model_cache.CacheError, match=f"cache {what} .* owned by user id .*refusing"
    ):
        tvm_ethos.compile(model, target="llvm", cache_dir=d)
    monkeypatch.undo()
    assert tvm_ethos.compile(model, target="llvm", cache_dir=d).from_cache


def _with_uid(st, uid):
    fields = list(st)
    fields[stat.ST_UID] = uid
    return os.stat_result(fields)


def test_cli_reports_an_untrusted_cache_in_one_line(tmp_path, model, capsys, monkeypatch):
    from tvm_ethos import cli

    d = tmp_path / "c"
    d.mkdir(mode=0o777)
    os.chmod(d, 0o777)
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    monkeypatch.setenv(model_cache.CACHE_ENV_VAR, str(d))
    assert cli.main(["compile", str(src), "--target", "llvm", "-o", str(tmp_path / "m.tar")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "writable by group or others" in err[0]


def test_concurrent_writers_never_leave_half_an_entry(tmp_path):
    """Four processes store the same key (two different packages) while this one reads it:
    every read is a whole entry, and no temporary file is left. The writers are spawned, not
    forked: a fork of a process running other threads (a pytest-xdist worker's) can deadlock."""
    d = str(tmp_path / "c")
    model_cache.ensure_dir(d)
    packages = [os.urandom(1 << 20), os.urandom(1 << 20)]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        res = pool.map_async(store_many, [(d, "k", packages[i % 2], 20) for i in range(4)])
        with warnings.catch_warnings():
            warnings.simplefilter("error", model_cache.CacheWarning)   # a half entry fails
            while not res.ready():
                got = model_cache.lookup(d, "k")
                assert got is None or got in packages
        assert res.get() == [True] * 4
    assert model_cache.lookup(d, "k") in packages
    assert os.listdir(d) == ["k" + model_cache.SUFFIX]


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    d = str(tmp_path / "c")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model_cache.os, "replace", boom)
    with pytest.raises(OSError, match="No space"):
        model_cache.store(d, "k", b"package")
    assert os.listdir(d) == []


@given(package=st.binary(max_size=512), where=st.integers(min_value=0), bit=st.integers(0, 7))
@settings(max_examples=200, deadline=None)
def test_any_flipped_bit_of_an_entry_is_caught(package, where, bit):
    entry = model_cache.entry_bytes(package)
    assert model_cache.verified_package(entry) == package
    damaged = bytearray(entry)
    damaged[where % len(entry)] ^= 1 << bit
    assert model_cache.verified_package(bytes(damaged)) is None
    assert model_cache.verified_package(entry[:-1]) is None
