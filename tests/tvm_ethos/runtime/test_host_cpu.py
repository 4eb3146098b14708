"""Host CPU records (tvm_ethos/runtime/host_cpu.py, tvm_ethos/host/cpu/host_cpu.py): what a
compiled model's host code needs of the CPU, checked before its library is loaded, in the
cache key, and the ``-mcpu`` tests and users build for; LLVM's own CPU tables are the oracle."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tflite_builder as tb
import tvm
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers import host_cpu as helper
from tvm_ethos.compiler import load_members
from tvm_ethos.errors import ModelLoadError, OptionError
from tvm_ethos.host.cpu import cpu_schedule
from tvm_ethos.host.cpu import host_cpu as lower_cpu
from tvm_ethos.package import package_bytes, read_package, verify_package_bytes
from tvm_ethos.runtime import cache
from tvm_ethos.runtime import host_cpu as rt_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
x86_only = pytest.mark.skipif(rt_cpu.host_features() is None,
                              reason="not an x86 Linux machine (no /proc/cpuinfo flags)")
#: /proc/cpuinfo flags of an AVX2-only Xeon (Broadwell), the CPU that died with SIGILL
AVX2_XEON_FLAGS = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 "
                   "clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc "
                   "pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes "
                   "xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch fsgsbase bmi1 "
                   "hle avx2 smep bmi2 erms invpcid rtm rdseed adx smap xsaveopt arat")
LEVELS = [name for name, _added in rt_cpu.X86_LEVELS]
CPUS = ["znver4", "znver3", "znver2", "cascadelake", "skylake-avx512", "icelake-server",
        "sapphirerapids", "broadwell", "haswell", "sandybridge", "nehalem"] + LEVELS


def _record(mcpu: str) -> rt_cpu.CpuRecord:
    return lower_cpu.cpu_record({"kind": "llvm", "mcpu": mcpu})


def _hidden_host():
    """This machine as a virtual machine that hides every extension of its CPU beyond
    x86-64-v2 would show it: (the extensions left, those hidden); skipped where none is."""
    host = rt_cpu.host_features()
    own = set(lower_cpu.cpu_record(lower_cpu.system_target()).features)
    hidden = own - set(_record("x86-64-v2").features)
    if not hidden:
        pytest.skip("this CPU has no extension beyond x86-64-v2 to hide")
    return frozenset(host - hidden), hidden


def _model():
    return tb.conv2d(np.random.RandomState(0), in_shape=(1, 6, 6, 8), cout=8)


# ------------------------------------------------------------------ the host's extensions
def test_cpuinfo_flags_read_as_llvm_names():
    feats = rt_cpu.parse_cpuinfo(f"processor\t: 0\nmodel name\t: Xeon\nflags\t\t: "
                                 f"{AVX2_XEON_FLAGS}\n\nprocessor\t: 1\nflags\t\t: avx512f\n")
    assert {"avx2", "fma", "bmi", "lzcnt", "sse4.1", "sse3", "sahf", "pclmul"} <= feats
    assert not any(f.startswith("avx512") for f in feats)   # the first processor's line only
    assert rt_cpu.x86_level(feats) == "x86-64-v3"
    assert rt_cpu.parse_cpuinfo("processor\t: 0\n") == frozenset()


@x86_only
def test_every_flag_name_is_an_llvm_feature():
    """Each recorded extension is a feature LLVM knows for some x86 CPU, so a record of a real
    target can hold every one of them."""
    known = set()
    for mcpu in CPUS + ["alderlake", "bdver4"]:
        target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu})
        known |= {str(f) for f in tvm.target.codegen.llvm_get_cpu_features(target)}
    assert set(rt_cpu.X86_FLAGS) <= known


@x86_only
@pytest.mark.parametrize("level", LEVELS)
def test_x86_levels_are_llvms(level):
    """The levels an error suggests are LLVM's: the extensions of ``-mcpu=x86-64-vN``."""
    feats = _record(level).features
    want = {f for i, (name, _a) in enumerate(rt_cpu.X86_LEVELS) if name == level
            for _n, added in rt_cpu.X86_LEVELS[i:] for f in added}
    assert set(feats) == want
    assert rt_cpu.x86_level(feats) == level


@x86_only
def test_this_machine_runs_its_own_target():
    """The default host target (LLVM's name for this CPU) needs nothing this machine's kernel
    does not list, and the tests' CPU for it is found."""
    host = rt_cpu.host_features()
    assert rt_cpu.missing_features(lower_cpu.cpu_record(cpu_schedule.host_target()), host) == ()
    assert helper.runnable_mcpu() is not None


@x86_only
def test_hidden_extensions_are_switched_off(monkeypatch):
    """A virtual machine that hides extensions (AVX2, AVX-512...) of a CPU whose model has
    them: the host target switches them off (``-mattr=-avx2,...``), so no code uses them."""
    left, hidden = _hidden_host()
    monkeypatch.setattr(lower_cpu, "host_features", lambda: left)
    target = lower_cpu.system_target()
    record = lower_cpu.cpu_record(target)
    assert rt_cpu.missing_features(record, left) == ()
    assert not set(record.features) & hidden
    assert record.mcpu == target["mcpu"] and target["mattr"]


@x86_only
@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(cpu=st.sampled_from(CPUS), drop=st.sets(st.sampled_from(sorted(rt_cpu.X86_FLAGS)),
                                                max_size=4))
def test_tests_pick_a_cpu_the_machine_runs(cpu, drop):
    """On any host (a real CPU's extensions, some of them hidden), the CPU tests build for has
    only extensions of the host; one is found wherever a candidate qualifies."""
    host = frozenset(set(_record(cpu).features) - drop)
    for has, lacks in (((), ()), (("avx2",), ("avx512vnni",)), (("avx512f",), ())):
        mcpu = helper.runnable_mcpu(has, lacks, host=host)
        fits = [c for c in helper.CANDIDATES if set(_record(c).features) <= host
                and set(has) <= set(_record(c).features)
                and not set(lacks) & set(_record(c).features)]
        assert (mcpu is None) == (not fits)
        if mcpu is not None:
            feats = set(_record(mcpu).features)
            assert feats <= host and set(has) <= feats and not set(lacks) & feats


# ------------------------------------------------------------------ the check
def test_missing_features_are_one_clear_error():
    record = rt_cpu.CpuRecord("x86_64", "znver4", ("avx2", "avx512f", "avx512vnni", "sse2"))
    host = rt_cpu.parse_cpuinfo(f"flags\t: {AVX2_XEON_FLAGS}")
    with pytest.raises(rt_cpu.HostCpuError) as err:
        rt_cpu.check_host_cpu(record, "m.tar", arch="x86_64", host=host)
    msg = str(err.value)
    assert "\n" not in msg and isinstance(err.value, ModelLoadError)
    assert msg.startswith("m.tar: ") and "-mcpu=znver4" in msg
    assert "lacks: avx512f, avx512vnni;" in msg and "avx2," not in msg
    assert '--target "llvm -mcpu=x86-64-v3"' in msg   # the newest level this host has
    rt_cpu.check_host_cpu(record._replace(features=("avx2", "sse2")), "m", "x86_64", host)
    rt_cpu.check_host_cpu(None, "m", "x86_64", host)   # a package older than records
    with pytest.raises(rt_cpu.HostCpuError, match=r"is for x86_64 .* this machine is aarch64"):
        rt_cpu.check_host_cpu(record, "m", arch="aarch64", host=frozenset())


@pytest.mark.parametrize("bad", [{"arch": "x86_64"}, {"arch": 1, "mcpu": "x", "features": []},
                                 {"arch": "x86_64", "mcpu": "x", "features": "avx2"}, "znver4"])
def test_malformed_record_is_a_load_error(bad):
    with pytest.raises(ModelLoadError, match=r"^p: malformed host CPU record .* compile the "):
        rt_cpu.read_cpu_record({"host_cpu": bad}, "p")
    assert rt_cpu.read_cpu_record({}, "p") is None


def test_runtime_module_imports_no_tvm():
    script = ("import sys, tvm_ethos.runtime.host_cpu as h; h.host_features(); "
              "print('tvm' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


# ------------------------------------------------------------------ packages and the cache
@x86_only
def test_package_records_its_cpu_and_refuses_a_cpu_without_it(tmp_path, monkeypatch):
    """A saved package names the extensions of its code; one that needs an extension this CPU
    lacks (faked: ``avx512fp16`` added to its record) is refused before its library is loaded,
    in one line naming the extension and the rebuild."""
    import tvm

    cm = tvm_ethos.compile(tvm_ethos.load_model(_model()), target="llvm", cache_dir=False)
    path = str(tmp_path / "m.tar")
    cm.save(path)
    members = read_package(path)
    meta = json.loads(members["meta.json"])
    assert meta["host_cpu"] == lower_cpu.cpu_record(cpu_schedule.host_target()).to_json()
    assert tvm_ethos.load(path).cpu_record == cm.cpu_record

    host = rt_cpu.host_features()
    lacking = next(f for f in ("avx512fp16", "avxvnni", "fma4", "xop") if f not in host)
    meta["host_cpu"]["features"] = sorted(meta["host_cpu"]["features"] + [lacking])
    members["meta.json"] = json.dumps(meta, sort_keys=True).encode()
    forged = tmp_path / "forged.tar"
    forged.write_bytes(package_bytes(list(members.items()), tar=True))

    def no_load(*a, **k):
        raise AssertionError("the shared library was loaded")

    monkeypatch.setattr(tvm.runtime, "load_module", no_load)
    with pytest.raises(rt_cpu.HostCpuError) as err:
        tvm_ethos.load(forged)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{forged}: ")
    assert f"lacks: {lacking};" in msg and '--target "llvm -mcpu=' in msg


@x86_only
def test_a_model_built_for_another_cpu_saves_but_does_not_run(tmp_path):
    """``-mcpu`` of a CPU with an extension this one lacks: the model compiles and saves (for
    that machine) and refuses to run here instead of dying with SIGILL. In a child process, so
    a failure cannot take pytest with it."""
    mcpu = next((c for c in ("sapphirerapids", "znver4", "cascadelake", "haswell")
                 if not helper.runs_here(c)), None)
    if mcpu is None:
        pytest.skip("this machine runs every CPU of the list")
    script = f"""
import sys, numpy as np
sys.path.insert(0, {os.path.join(ROOT, 'tests', 'tvm_ethos')!r})
import tflite_builder as tb, tvm_ethos
from tvm_ethos.runtime.host_cpu import HostCpuError
model = tb.conv2d(np.random.RandomState(0), in_shape=(1, 6, 6, 8), cout=8)
cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm -mcpu={mcpu}", cache_dir=False)
cm.save({str(tmp_path / 'other.tvmethos')!r})
for run in (lambda: cm.run(np.zeros((1, 6, 6, 8), np.int8)),
            lambda: tvm_ethos.load({str(tmp_path / 'other.tvmethos')!r})):
    try:
        run()
        print("ran")
    except HostCpuError as err:
        print("refused:", err)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all(ln.startswith("refused:") for ln in lines), proc.stdout
    assert f"-mcpu={mcpu}" in lines[1]


@x86_only
def test_mcpu_option_builds_for_that_cpu(monkeypatch):
    """``llvm -mcpu=<a CPU without VNNI>`` on any host: the package records that CPU, its
    kernels take no VNNI form, and the model runs bit-exact with TFLite here."""
    from conftest import assert_bit_exact

    mcpu = helper.mcpu_or_skip(lacks=("avx512vnni",))
    seen = []
    real = cpu_schedule.schedule_for_cpu

    def spy(prim, *a, **k):
        out = real(prim, *a, **k)
        seen.append(out.script())
        return out

    monkeypatch.setattr(cpu_schedule, "schedule_for_cpu", spy)
    model = _model()
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=f"llvm -mcpu={mcpu}",
                           cache_dir=False)
    assert cm.cpu_record == _record(mcpu) and "avx512vnni" not in cm.cpu_record.features
    assert cm.targets == f"llvm -mcpu={mcpu}"
    assert seen and not any("vpdpbusd" in text for text in seen)
    assert_bit_exact(cm, model, n_inputs=2)
    plain = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm", cache_dir=False)
    assert plain.targets == "llvm"   # no -mcpu given: none printed


def test_bad_mcpu_is_an_option_error():
    with pytest.raises(OptionError, match=r"option 'mcpu' of target 'llvm': bad value "
                                          r"'pentium9'; an LLVM CPU name"):
        tvm_ethos.compile(tvm_ethos.load_model(_model()), target="llvm -mcpu=pentium9",
                          cache_dir=False)


def test_cache_key_includes_the_cpu():
    model = _model()
    keys = {cache.cache_key(model, "llvm", {}, (1,), cpu=_record(c).to_json())
            for c in ("znver4", "znver3", "haswell")}
    keys.add(cache.cache_key(model, "llvm", {}, (1,)))
    assert len(keys) == 4
    assert cache.cache_key(model, "llvm", {}, (1,), cpu=_record("haswell").to_json()) in keys


@x86_only
def test_shared_cache_gives_each_cpu_its_own_entry(tmp_path, monkeypatch):
    """One cache directory, two CPUs (this one, then this one with its newer extensions hidden
    as a virtual machine would): the second does not load the first's entry (it could not run
    it), it compiles its own, which runs; each finds its own entry again."""
    from conftest import assert_bit_exact

    model = _model()
    first = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm", cache_dir=tmp_path)
    left, hidden = _hidden_host()
    monkeypatch.setattr(lower_cpu, "host_features", lambda: left)
    monkeypatch.setattr(rt_cpu, "host_features", lambda: left)
    second = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm", cache_dir=tmp_path)
    assert not second.from_cache and second.cache_path != first.cache_path
    assert not set(second.cpu_record.features) & hidden
    assert_bit_exact(second, model, n_inputs=2)
    again = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm", cache_dir=tmp_path)
    assert again.from_cache and again.cache_path == second.cache_path
    # the first machine's entry, read as a package on the second: refused by name
    with open(first.cache_path, "rb") as f:
        package = cache.verified_package(f.read())
    with pytest.raises(rt_cpu.HostCpuError, match="needs CPU features this CPU lacks: "):
        load_members(verify_package_bytes(package, "entry"), "entry", {})
