"""The compile pipeline, its stages in order: import -> partition -> lower (constants
attached) -> plan (and schedule) -> command streams -> NPU codegen (the emulator) -> host
kernels -> network build (or, for an output that holds the streams only, the executor program
read without building). Each stage is timed (``tvm_ethos.stages``) and hands the next a typed
value; ``tvm_ethos.compile`` / ``compile_streams`` and ``partition_for`` call it and turn its
result into what they return."""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import tvm

from tvm_ethos.errors import CompileError, TvmEthosError
from tvm_ethos.frontend import load_model
from tvm_ethos.host.cpu.cpu_tir_pipeline import PIPELINE_NAME
from tvm_ethos.host.cpu.host_cpu import building_for
from tvm_ethos.partition import PartitionReport, partition
from tvm_ethos.pipeline import codegen
from tvm_ethos.pipeline.network_build import (
    assign_backends,
    build_network,
    legalize,
    read_program,
    split_main,
    state_constants,
)
from tvm_ethos.pipeline.npu_subgraphs import attach_npu_constants
from tvm_ethos.pipeline.plan import plan_subgraphs
from tvm_ethos.pipeline.planning import PlanningOptions, check_devices
from tvm_ethos.pipeline.report import PlanReport
from tvm_ethos.pipeline.streams import command_streams
from tvm_ethos.runtime.program import NetworkProgram
from tvm_ethos.stages import stage
from tvm_ethos.targets import TargetList

log = logging.getLogger(__name__)


class Offloaded(NamedTuple):
    """A partitioned module made ready for a plain ``tvm.compile``, its plan report (with the
    streams' reports where streams were generated) and the streams' payloads by symbol."""

    module: object
    plan: PlanReport
    payloads: Mapping[str, object]
    #: per NPU symbol whose kernel keeps states: (its constants' count, the states'
    #: positions among them) (``LoweredSubgraph.state_consts``)
    states: Mapping[str, tuple[int, tuple[int, ...]]]


def offload(pmod, tl: TargetList, plan_opts: PlanningOptions, devices: dict,
            streams: bool = False, emulator: bool = True) -> Offloaded:
    """Every NPU subgraph planned, scheduled and built by ``relax.ext.<npu>`` (its calls become
    ``call_dps_packed`` of the emulator kernels, kept in the module's ``external_mods``), every
    host composite a ``call_tir`` of its exact kernel. ``tvm_ethos.compile`` and
    ``partition_for_*`` share it, so both build the same kernels. ``streams``: also generate
    the subgraphs' command streams; ``emulator``: False builds no emulator kernels
    (``codegen.without_emulator``) and makes and schedules no TIR for them."""
    npu_opts = {t.backend_id: t.options for t in tl.accelerators}
    lowered: dict = {}
    with stage("lower"):
        pmod = attach_npu_constants(pmod, set(npu_opts), lowered_out=lowered,
                                    with_primfunc=emulator)
    with stage("plan"):
        plan = plan_subgraphs(pmod, tl, plan_opts, devices, lowered, schedule=emulator)
    report, payloads = plan.report, {}
    if streams:
        with stage("streams"):
            made = command_streams(pmod, tl, lowered, plan.report, plan.planned)
        payloads = dict(made.payloads)
        if made.reports:
            report = report.with_streams(made.reports)
    with stage("emulator" if emulator else "npu calls"), \
            codegen.scheduled_primfuncs(plan.scheduled), \
            (contextlib.nullcontext() if emulator else codegen.without_emulator()):
        pmod = codegen.run_npu_codegen(pmod, npu_opts)
    with stage("host kernels"):
        pmod = codegen.lower_host_composites(pmod, tl.host.backend_id,
                                             codegen.host_kernels_vnni(tl),
                                             codegen.host_kernels_avx2(tl))
    states = {sym: (len(lw.consts), lw.state_consts) for sym, lw in lowered.items()
              if lw.state_consts}
    return Offloaded(pmod, report, payloads, states)


@dataclass(frozen=True)
class Compiled:
    """What the pipeline made of a model: the imported Relax module, its partition, the VM
    executable (None where nothing was built), the executor's program and the plan report."""

    module: object
    partition: PartitionReport
    executable: object | None
    program: NetworkProgram
    plan: PlanReport


def compile_network(mod, tl: TargetList, plan_opts: PlanningOptions,
                    build: bool = True) -> Compiled:
    """Run the pipeline on ``mod`` (an IRModule, or what ``load_model`` takes) for ``tl``.
    Without ``build`` the executor program is read but no host or emulator library is
    built. A failure that is not a :class:`TvmEthosError` becomes one
    :class:`CompileError` naming the targets."""
    devices = check_devices(tl, plan_opts)  # planner devices, memory pools: up front
    if not isinstance(mod, tvm.IRModule):
        with stage("import"):
            mod = load_model(mod)
    with stage("partition"):
        pmod, report = partition(mod, tl)
    log.debug("partition:\n%s", report)
    try:
        with building_for(tl.host.options.get("mcpu")):   # llvm -mcpu=..., else this CPU's
            # plan every NPU subgraph and schedule it (rfcs/0005); the emulator builds them
            done = offload(pmod, tl, plan_opts, devices, streams=True, emulator=build)
            if build:
                # subgraphs per backend; one llvm build (the VM executable) + the OpenCL kernels
                with stage("host build"):
                    ex, program = build_network(
                        done.module,
                        report,
                        tl.host.backend_id,
                        tl.host.options.get("cpu_ops"),
                        tir_pipeline=PIPELINE_NAME,
                        gpu_tiling=tl.host.options.get("tiling"),
                    )
            else:
                with stage("program"):
                    ex, program = None, read_network(done.module, report, tl)
            program.payloads = dict(done.payloads)
            program.states = state_constants(program, done.states)
    except TvmEthosError:
        raise
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise CompileError(
            f"compiling for {tl} failed: {msg[-1] if msg else type(err).__name__}"
        ) from err
    return Compiled(mod, report, ex, program, done.plan)


def read_network(pmod, report: PartitionReport, tl: TargetList) -> NetworkProgram:
    """The executor program of an offloaded module, as ``build_network`` reads it (the same
    split and legalization), with nothing compiled."""
    asg = assign_backends(pmod, report, tl.host.backend_id, tl.host.options.get("cpu_ops"))
    smod, segments = split_main(pmod, asg)
    return read_program(legalize(smod), segments, asg.npu_backends, tl.host.backend_id)
