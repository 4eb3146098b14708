"""Backend registry: built-ins through entry points, third-party backends from a generated
dist-info entry point and from TVM_ETHOS_BACKEND_PATH, seed 002's version and id rules."""
import textwrap

import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact

import tvm_ethos
from tvm_ethos.backends import registry as R
from tvm_ethos.backends.base import BACKEND_API_VERSION, Backend

PLUGIN = '''
from pathlib import Path
from tvm_ethos.backends.base import Backend, LayerSupport, OptimizationViews
from tvm_ethos.backends.npu_common import NpuBackend, common_npu_checks

MARKER = Path({marker!r})

class AcmeBackend(NpuBackend):
    backend_id = {bid!r}

    def layer_support(self):
        def conv2d(q, o):
            return [] if q.weights.shape[0] <= {kmax} else ["kernel too tall for acme"]

        return LayerSupport({{"conv2d": conv2d}},
                            common=lambda q, o: common_npu_checks(q, o))

    def optimize_subgraph(self, view, options=None):
        if {fail!r}:
            return OptimizationViews(failed=[(view, "acme refuses every subgraph")])
        return OptimizationViews(untouched=[view])

def get_backend_id():
    return {bid!r}

def get_version():
    return {version!r}

def backend_factory():
    MARKER.write_text("loaded")
    return AcmeBackend()
'''


def write_plugin(path, bid, marker, version=BACKEND_API_VERSION, fail=False, kmax=7):
    path.write_text(
        PLUGIN.format(bid=bid, marker=str(marker), version=tuple(version), fail=fail, kmax=kmax)
    )


@pytest.fixture
def fresh_registry(monkeypatch):
    monkeypatch.delenv(R.PATH_ENV, raising=False)
    R.reset_registry()
    yield
    R.reset_registry()


def test_builtins_registered_as_plugins(fresh_registry):
    reg = R.get_registry()
    assert {"ethos-n", "ethos-u", "llvm", "opencl"} <= set(reg.ids())
    assert all(
        "tvm_ethos.backends." in reg.source_of(b) for b in ("ethos-n", "ethos-u", "llvm", "opencl")
    )
    caps = reg.get("ethos-n").capabilities()
    assert (
        caps.fallback_import_memory_required
        and caps.is_npu
        and "dma_buf" in caps.import_memory_sources
    )
    assert reg.get("llvm").capabilities().is_host
    mm = reg.get("ethos-u").create_memory_manager()
    mm.acquire()
    assert mm.acquired
    mm.release()
    assert not mm.acquired


@pytest.mark.parametrize("backend,host,ok", [
    ((1, 0), (1, 0), True), ((2, 1), (2, 4), True), ((2, 4), (2, 4), True),
    ((2, 5), (2, 4), False), ((2, 0), (1, 0), False), ((2, 0), (3, 0), False),
])
def test_version_rules(backend, host, ok):
    assert R.is_compatible_version(backend, host) is ok


@pytest.mark.parametrize(
    "name,ok",
    [
        ("Arm_GpuAcc_backend.py", True),
        ("Arm_GpuAcc_backend.py.1", True),
        ("Arm_GpuAcc_backend.py.1.2.3", True),
        ("Arm_GpuAcc_backend.py.10.1.27", True),
        ("Arm123_GpuAcc_backend.py", True),
        ("Arm_GpuAcc456_backend.py", True),
        ("Arm_GpuAcc_backend.py.10.1.33.", False),
        ("Arm_GpuAcc_backend.py.3.4..5", False),
        ("Arm_GpuAcc_backend.py.1,1.1", False),
        ("Arm%Co_GpuAcc_backend.py", False),
        ("Arm_Gpu.Acc_backend.py", False),
        ("GpuAcc_backend.py", False),
        ("_GpuAcc_backend.py", False),
        ("Arm__backend.py", False),
        ("Arm_GpuAcc.py", False),
        ("__backend.py", False),
        ("__.py", False),
        ("Arm_GpuAcc_backend", False),
        ("Arm_GpuAcc_backend_v1.2.py", False),
    ],
)
def test_file_name_rules(name, ok):
    assert R.is_valid_backend_file_name(name) is ok


def test_id_rules_and_duplicates(caplog):
    reg = R.BackendRegistry()
    make = lambda: Backend()  # noqa: E731
    assert not reg.register("", make)
    assert not reg.register("a,b", make)
    assert not reg.register("has space", make)
    assert not reg.register(None, make)
    assert reg.register("Acme-1", make)
    assert not reg.register("Acme-1", make)
    assert not reg.register(
        "future", make, version=(BACKEND_API_VERSION[0], BACKEND_API_VERSION[1] + 1)
    )
    assert not reg.register("old-major", make, version=(BACKEND_API_VERSION[0] + 1, 0))
    reasons = [r.reason for r in reg.rejected]
    assert any("invalid backend id" in r for r in reasons)
    assert any("already registered" in r for r in reasons)
    assert any("not compatible" in r for r in reasons)
    assert reg.ids() == ["Acme-1"]
    assert "rejected" in caplog.text


def test_third_party_from_path(tmp_path, monkeypatch, fresh_registry):
    good_marker, bad_marker = tmp_path / "good.loaded", tmp_path / "bad.loaded"
    write_plugin(tmp_path / "Acme_Npu_backend.py", "acme-npu", good_marker)
    write_plugin(tmp_path / "Acme_Future_backend.py.1.2", "acme-future", bad_marker,
                 version=(BACKEND_API_VERSION[0], BACKEND_API_VERSION[1] + 1))
    write_plugin(tmp_path / "acme-bad-name_backend.py", "acme-x", bad_marker)
    (tmp_path / "Acme_Dangling_backend.py").symlink_to(tmp_path / "missing.py")
    # same file: once
    (tmp_path / "Acme_Link_backend.py").symlink_to(tmp_path / "Acme_Npu_backend.py")
    monkeypatch.setenv(R.PATH_ENV, f"relative/dir:{tmp_path}:/does/not/exist")
    reg = R.get_registry()
    assert "acme-npu" in reg.ids()
    assert "acme-future" not in reg.ids() and "acme-x" not in reg.ids()
    reasons = " | ".join(r.reason for r in reg.rejected)
    assert (
        "not compatible" in reasons and "does not follow" in reasons and "does not exist" in reasons
    )
    assert not bad_marker.exists()  # a rejected backend is never loaded

    rs = np.random.RandomState(1)
    model = tb.conv2d(rs)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="acme-npu,llvm")
    assert good_marker.exists()
    assert cm.partition_summary == {"acme-npu": 1}
    assert_bit_exact(cm, model, n_inputs=2)
    tall = tb.conv2d(rs, kernel=(9, 3))
    rep = tvm_ethos.partition_report(tvm_ethos.load_model(tall), "acme-npu,llvm")
    assert rep.operators[0].rejections["acme-npu"] == ["kernel too tall for acme"]


def test_third_party_from_entry_point(tmp_path, monkeypatch, fresh_registry):
    pkg = tmp_path / "site"
    pkg.mkdir()
    write_plugin(pkg / "acme_picky_plugin.py", "acme-picky", tmp_path / "picky.loaded", fail=True)
    dist = pkg / "acme_picky-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-picky\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""
        [tvm_ethos.backends]
        acme-picky = acme_picky_plugin
        wrong-name = acme_picky_plugin
    """))
    monkeypatch.syspath_prepend(str(pkg))
    reg = R.get_registry()
    assert "acme-picky" in reg.ids()
    assert any("entry point is named 'wrong-name'" in r.reason for r in reg.rejected)
    # optimize_subgraph fails every subgraph: its operators go to the next target
    rs = np.random.RandomState(2)
    model = tb.conv2d(rs)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="acme-picky,ethos-u,llvm")
    assert cm.partition_summary == {"ethos-u": 1}
    assert cm.partition_report.operators[0].rejections["acme-picky"] == [
        "optimize_subgraph failed: acme refuses every subgraph"]
    assert_bit_exact(cm, model, n_inputs=2)


def test_builtins_come_in_the_installed_metadata_order(fresh_registry):
    """The built-ins register without the metadata being read, in the order the metadata
    lists them (the order of ids, so of every message listing targets)."""
    from importlib import metadata

    listed = [ep.name for ep in metadata.entry_points(group=R.ENTRY_POINT_GROUP)
              if ep.name in R.BUILTIN_ENTRY_POINTS]
    assert listed, "tvm-ethos's entry points are not installed"
    assert R.get_registry().known_ids() == listed


_OPTION = '''
from tvm_ethos.backends.base import OptionSpec

AcmeBackend.options_schema = lambda self: {"mode": OptionSpec("fast", ("fast", "slow"),
                                                              help="acme's mode")}
'''


@pytest.fixture
def acme_on_path(tmp_path, monkeypatch, fresh_registry):
    """acme-npu, with one option (``mode``), in TVM_ETHOS_BACKEND_PATH."""
    plugin = tmp_path / "Acme_Npu_backend.py"
    write_plugin(plugin, "acme-npu", tmp_path / "acme.loaded")
    plugin.write_text(plugin.read_text() + _OPTION)
    monkeypatch.setenv(R.PATH_ENV, str(tmp_path))
    return tmp_path


def test_plugins_are_looked_for_when_first_needed(acme_on_path):
    reg = R.get_registry()
    assert reg.known_ids() == list(R.BUILTIN_ENTRY_POINTS)   # the built-ins: no scan yet
    assert reg.is_registered("ethos-u") and "acme-npu" not in reg.known_ids()
    assert reg.is_registered("acme-npu")                      # not registered: looked for
    assert reg.known_ids()[-1] == "acme-npu" and reg.ids() == reg.known_ids()


@pytest.mark.parametrize("first_needed", ["ids", "get"])
def test_a_plugin_looked_for_late_is_registered_as_one_looked_for_at_once(acme_on_path,
                                                                         first_needed):
    eager = R.BackendRegistry()
    eager.load_plugins()
    reg = R.get_registry()
    if first_needed == "ids":
        reg.ids()
    else:
        reg.get("acme-npu")
    assert reg.ids() == eager.ids()
    assert [reg.source_of(b) == eager.source_of(b) for b in reg.ids()] == \
        [b not in R.BUILTIN_ENTRY_POINTS for b in reg.ids()]   # built-ins: "built-in ..."


def _tvmc(argv, capsys):
    from tvm_ethos.cli import main

    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_tvmc_compile_takes_a_plugins_target_option(acme_on_path, capsys):
    """A plugin's --target-<id>-<key> is one of tvmc compile's options, though the
    registry looks for plugins only when needed: listed by --help, and read (here refused:
    acme-npu is not in --target) where given."""
    rc, out, _ = _tvmc(["compile", "--help"], capsys)
    assert rc == 0 and "--target-acme-npu-mode" in out
    R.reset_registry()
    model = acme_on_path / "m.tflite"
    model.write_bytes(b"")
    rc, _, err = _tvmc(["compile", str(model), "--target", "ethos-u",
                        "--target-acme-npu-mode=slow", "-o", str(acme_on_path / "o.tflite")],
                       capsys)
    assert (rc, err) == (2, "tvmc compile: error: --target-acme-npu-mode is an option of target "
                            "'acme-npu', which is not in --target 'ethos-u'\n")
