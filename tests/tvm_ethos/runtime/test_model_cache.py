"""The compiled-model cache (seed 003): a second compile of the same inputs loads from the cache."""
import os
import time

import numpy as np
import pytest

import tflite_builder as tb
import tvm_ethos
from conftest import assert_bit_exact
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
    base = model_cache.cache_key(model, "ethos-u -accelerator_config=ethos-u55-128,llvm", {}, (1, 1))
    assert base == model_cache.cache_key(bytes(model), "ethos-u -accelerator_config=ethos-u55-128,llvm", {}, (1, 1))
    assert base != model_cache.cache_key(model, "ethos-u -accelerator_config=ethos-u65-256,llvm", {}, (1, 1))
    assert base != model_cache.cache_key(model, "ethos-u -accelerator_config=ethos-u55-128,llvm", {"x": 1}, (1, 1))
    assert base != model_cache.cache_key(model + b"\0", "ethos-u -accelerator_config=ethos-u55-128,llvm", {}, (1, 1))
    monkeypatch.setattr(model_cache, "_PACKAGE_DIGEST", "tvm-ethos 9.9.9 src x tvm y")
    assert base != model_cache.cache_key(model, "ethos-u -accelerator_config=ethos-u55-128,llvm", {}, (1, 1))
    monkeypatch.undo()
    # a different target option compiles again; runtime options do not change the key
    tvm_ethos.compile(model, target="ethos-u,llvm", cache_dir=d)
    other = tvm_ethos.compile(model, target="ethos-u,llvm", accelerator_config="ethos-u65-256", cache_dir=d)
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


def test_damaged_entry_is_recompiled(tmp_path, model):
    d = tmp_path / "c"
    first = tvm_ethos.compile(model, target="llvm", cache_dir=d)
    with open(first.cache_path, "wb") as f:
        f.write(b"garbage")
    again = tvm_ethos.compile(model, target="llvm", cache_dir=d)
    assert not again.from_cache
    assert tvm_ethos.compile(model, target="llvm", cache_dir=d).from_cache
