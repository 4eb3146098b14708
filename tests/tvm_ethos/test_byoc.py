"""The TVM way: ``partition_for_ethos_u/_n`` then a plain ``tvm.compile`` and the Relax VM,
bit-exact with TFLite's reference kernels on every shipped model."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import model_path, oracle, random_inputs

import tvm_ethos

MODELS = ["resnet8_cifar", "ds_cnn_kws",
          pytest.param("mobilenet_v1_0.25_96", marks=pytest.mark.slow),
          pytest.param("mobilenet_v1_1.0_224", marks=pytest.mark.slow)]
PARTITION_FOR = {"ethos-u": "partition_for_ethos_u", "ethos-n": "partition_for_ethos_n"}


def _vm_outputs(vm, xs) -> list[np.ndarray]:
    import tvm

    res = vm["main"](*[tvm.runtime.tensor(x) for x in xs])
    return [res.numpy()] if hasattr(res, "numpy") else [r.numpy() for r in res]


@pytest.fixture(scope="module")
def built():
    """One partition_for + tvm.compile per (model, NPU), shared by the tests of this module."""
    import tvm
    from tvm import relax

    cache = {}

    def get(name, backend):
        if (name, backend) not in cache:
            mod = tvm_ethos.load_model(model_path(name))
            pmod = getattr(tvm_ethos, PARTITION_FOR[backend])(mod)
            ex = tvm.compile(pmod, target="llvm")
            cache[name, backend] = (mod, pmod, relax.VirtualMachine(ex, tvm.cpu()))
        return cache[name, backend]

    return get


@pytest.mark.parametrize("backend", sorted(PARTITION_FOR))
@pytest.mark.parametrize("name", MODELS)
def test_plain_tvm_compile_bit_exact(built, name, backend):
    _mod, pmod, vm = built(name, backend)
    assert tvm_ethos.partition_report(pmod).summary().get(backend, 0) > 0
    rs = np.random.RandomState(7)
    for _ in range(2):
        xs = random_inputs(model_path(name), rs)
        # TFLite's reference kernels abort on MobileNetV1-224 in this ai-edge-litert build: its
        # optimized builtin kernels (no XNNPack) stand in, as in test_models.py
        got = _vm_outputs(vm, xs)
        ref = oracle(model_path(name), xs, reference=name != "mobilenet_v1_1.0_224")
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.shape == r.shape  # TFLite's output shapes, not the importer's
            np.testing.assert_array_equal(g, r)


def test_outputs_follow_inputs(built):
    """The exactness checks above can fail: ResNet-8's outputs change with its input."""
    _mod, _pmod, vm = built("resnet8_cifar", "ethos-u")
    rs = np.random.RandomState(1)
    a, b = (_vm_outputs(vm, random_inputs(model_path("resnet8_cifar"), rs))[0] for _ in range(2))
    assert not np.array_equal(a, b)


def test_same_plan_and_outputs_as_tvm_ethos_compile(built):
    """partition_for plans every NPU subgraph as tvm_ethos.compile does, and runs the same."""
    mod, pmod, vm = built("resnet8_cifar", "ethos-u")
    cm = tvm_ethos.compile(mod, target="ethos-u,llvm")
    plan = tvm_ethos.plan_report(pmod)
    # compile also generates the command streams and reports them; the plans are the same
    assert "streams" in cm.plan_report and "streams" not in plan
    assert plan == {k: v for k, v in cm.plan_report.items() if k != "streams"}
    assert plan["planned"] and plan["subgraphs"]
    assert all(s["planned"] for s in plan["subgraphs"].values())
    xs = random_inputs(model_path("resnet8_cifar"), np.random.RandomState(2))
    np.testing.assert_array_equal(_vm_outputs(vm, xs)[0], cm.run(*xs)[0])


def test_budget_routes_to_the_planner_and_the_library_exports(built, tmp_path):
    """Planning options reach the planner through partition_for_*; the emulator kernels travel
    inside the exported library (external_mods), as with any BYOC codegen."""
    import tvm
    from tvm import relax

    mod, pmod, vm = built("resnet8_cifar", "ethos-u")
    (sub,) = tvm_ethos.plan_report(pmod)["subgraphs"].values()
    budget = sub["frontier"][-2]["memory_bytes"]  # the second fastest point: a cheap build
    assert budget < sub["peak_memory_bytes"]  # so the budget changes the plan
    tight = tvm_ethos.partition_for_ethos_u(mod, budget=budget)
    (tsub,) = tvm_ethos.plan_report(tight)["subgraphs"].values()
    assert tsub["budget_bytes"] == budget and tsub["peak_memory_bytes"] <= budget
    path = str(tmp_path / "resnet8.so")
    tvm.compile(tight, target="llvm").export_library(path)
    vm2 = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    xs = random_inputs(model_path("resnet8_cifar"), np.random.RandomState(3))
    np.testing.assert_array_equal(_vm_outputs(vm2, xs)[0], _vm_outputs(vm, xs)[0])


def test_import_registers_npu_codegens():
    import tvm

    for bid in ("ethos-u", "ethos-n"):
        assert tvm.get_global_func(f"relax.ext.{bid}", allow_missing=True) is not None


def test_plugin_npu_codegen_registered_through_registry():
    """A plugin NPU's codegen registers as ``relax.ext.<its id>`` through the registry. TVM's
    registry is the process's: the id is this test's own (test_registry's plugin compiles as
    acme-npu, and under pytest-xdist that file may run first in the same process)."""
    import tvm

    from tvm_ethos.backends.base import BACKEND_API_VERSION
    from tvm_ethos.backends.ethos_u import EthosUBackend
    from tvm_ethos.backends.registry import BackendRegistry
    from tvm_ethos.byoc import register_codegens

    class AcmeNpu(EthosUBackend):
        backend_id = "byoc-test-npu"

    class Broken(EthosUBackend):
        backend_id = "broken-npu"

        def codegen_factory(self):
            raise RuntimeError("no codegen")

    reg = BackendRegistry()
    assert reg.register("byoc-test-npu", AcmeNpu, version=BACKEND_API_VERSION)
    assert reg.register("broken-npu", Broken, version=BACKEND_API_VERSION)
    assert tvm.get_global_func("relax.ext.byoc-test-npu", allow_missing=True) is None
    assert register_codegens(reg) == ["byoc-test-npu"]  # the broken one is logged, not raised
    assert tvm.get_global_func("relax.ext.byoc-test-npu", allow_missing=True) is not None


def test_bad_option_is_one_clear_error():
    from tvm_ethos.errors import OptionError

    mod = tvm_ethos.load_model(model_path("ds_cnn_kws"))
    with pytest.raises(OptionError, match="accelerator_config"):
        tvm_ethos.partition_for_ethos_u(mod, accelerator_config="ethos-u99-1")
    with pytest.raises(OptionError, match="budget"):
        tvm_ethos.partition_for_ethos_u(mod, budget="lots")


def test_run_codegen_on_a_bare_partition_is_refused():
    """A partition whose subgraphs have no constants attached cannot become a kernel; RunCodegen
    on it names the call that works instead of building a kernel that reads past its arguments
    (TVM's FFI hands the CompileError back as a RuntimeError with the same message)."""
    from tvm import relax

    from tvm_ethos.errors import CompileError
    from tvm_ethos.partition import partition

    pmod = partition(tvm_ethos.load_model(model_path("ds_cnn_kws")), "ethos-u,llvm")[0]
    with pytest.raises((CompileError, RuntimeError), match="no constants attached, so RunCodegen"):
        relax.transform.RunCodegen()(pmod)
