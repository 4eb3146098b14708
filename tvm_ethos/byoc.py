"""The TVM way: ``relax.ext.<npu>`` codegens registered at import, and ``partition_for_*``.

TVM's ``RunCodegen`` looks each ``Codegen`` attribute up as the global function
``relax.ext.<name>``; a user who imports tvm_ethos and then drives TVM directly must find them
registered, so ``import tvm_ethos`` has :func:`register_codegens` run as soon as ``tvm_ffi`` is
loaded (at once if it is; else right after its first import, by ``import tvm`` or a TVM path of
ours: a compile that takes no TVM path never loads it). It asks the backend registry (so a
plugin NPU's codegen registers too) and needs only ``tvm_ffi``: the codegen itself
(``tvm_ethos.pipeline.codegen``, which imports all of TVM) loads when RunCodegen first calls.

``tvm.compile``'s default Relax pipeline does not run ``RunCodegen``, and cannot lower a module
whose NPU subgraphs still hold their local composite functions. So :func:`partition_for` does
what ``tvm_ethos.compile`` does before its own build: partition, plan and schedule every NPU
subgraph for its device, run the codegens, and turn host composites into exact ``call_tir``
kernels. What it returns is an ordinary Relax module that ``tvm.compile(mod, target="llvm")``
and ``relax.VirtualMachine`` run.
"""
from __future__ import annotations

import json
import logging

from ethos_arch.accelerators import DEFAULT_ACCELERATOR
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.errors import CompileError, TvmEthosError

log = logging.getLogger("tvm_ethos.byoc")

#: Module attribute holding the cascading planner's report (JSON) of a ``partition_for_*`` module.
PLAN_REPORT_ATTR = "tvm_ethos.plan_report"


def register_codegens(registry=None) -> list[str]:
    """Register the codegen of every registered backend that has one; returns the NPU ids whose
    ``relax.ext.<id>`` is now registered. A backend whose factory fails is logged and skipped:
    importing tvm_ethos must not fail because of one plugin."""
    registry = registry or get_registry()
    done = []
    for bid in registry.ids():
        try:
            cg = registry.get(bid).codegen_factory()
            if cg is not None:
                cg.register()
                if getattr(cg, "kind", None) == "npu":
                    done.append(bid)
        except Exception as err:  # a plugin's bug: logged, the others still register
            log.warning("backend %r: codegen not registered: %s: %s", bid, type(err).__name__, err)
    return done


def partition_for(mod, target, **options):
    """Partition ``mod`` for ``target`` and generate the NPU code; the result is a module for a
    plain ``tvm.compile``. ``options``: the target options and the planning options
    (``budget``, ``memory_pools``, ``planner_options``, ``plan``) that ``tvm_ethos.compile``
    takes. The partition report and the plan report are module attributes
    (:func:`tvm_ethos.partition_report`, :func:`plan_report`)."""
    # lazy: TVM and the compile driver load when partition_for runs; importing tvm_ethos stays light
    import tvm

    from tvm_ethos.compiler import PLANNING_OPTIONS, check_target_options
    from tvm_ethos.frontend import load_model
    from tvm_ethos.frontend.relax_module import reshape_outputs
    from tvm_ethos.partition import partition
    from tvm_ethos.pipeline import planning as cascade
    from tvm_ethos.pipeline.driver import offload
    from tvm_ethos.targets import parse_targets

    options = dict(options)
    plan_opts = cascade.planning_options(options)
    check_target_options(target, options, PLANNING_OPTIONS, "partition_for")
    tl = parse_targets(target, options)
    devices = cascade.check_devices(tl, plan_opts)
    if not isinstance(mod, tvm.IRModule):
        mod = load_model(mod)
    pmod, _report = partition(mod, tl)
    try:
        pmod, plan, _payloads, _states = offload(pmod, tl, plan_opts, devices)
    except TvmEthosError:
        raise
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise CompileError(
            f"code generation for {tl} failed: {msg[-1] if msg else type(err).__name__}"
        ) from err
    # the source model's output shapes (a host view), as CompiledModel.run gives them
    pmod = reshape_outputs(pmod)
    return pmod.with_attr(PLAN_REPORT_ATTR, json.dumps(plan.to_json(), sort_keys=True))


def partition_for_ethos_n(mod, variant: str = "n78", host: str = "llvm", **options):
    """Ethos-N's subgraphs planned and built (emulated), the rest left for the host: a module
    that a plain ``tvm.compile(mod, target="llvm")`` builds and ``relax.VirtualMachine`` runs.
    ``options``: Ethos-N's target options and the planning options of ``tvm_ethos.compile``."""
    return partition_for(mod, f"ethos-n,{host}", variant=variant, **options)


def partition_for_ethos_u(
    mod, accelerator_config: str = DEFAULT_ACCELERATOR.name, host: str = "llvm", **options
):
    """Ethos-U's subgraphs planned and built (emulated), the rest left for the host: a module
    that a plain ``tvm.compile(mod, target="llvm")`` builds and ``relax.VirtualMachine`` runs.
    ``options``: Ethos-U's target options and the planning options of ``tvm_ethos.compile``."""
    return partition_for(mod, f"ethos-u,{host}", accelerator_config=accelerator_config, **options)


def plan_report(mod) -> dict | None:
    """The plan report of a ``partition_for_*`` module: ``CompiledModel.plan_report`` less its
    ``"streams"`` entry, which ``tvm_ethos.compile`` adds when it generates the Ethos-U command
    streams (a partitioned module built by ``tvm.compile`` runs the TensorIR emulator)."""
    attrs = mod.attrs
    if attrs is None or PLAN_REPORT_ATTR not in attrs:
        return None
    return json.loads(str(attrs[PLAN_REPORT_ATTR]))
