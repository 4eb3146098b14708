"""A model compiled for ``ethos-u,tflite-micro``: the TFLite Micro file itself. ``run``
executes that file as a board would (its ``ethos-u`` operators on the functional model of
the Ethos-U, every other operator on TFLite's kernels: ``ethosu_stream.tflite_graph``),
``export_tflite`` writes it; there is no package form, since nothing in it is TVM code."""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ethosu_stream.tflite_graph import TfliteGraph
from tvm_ethos.backends.tflite_micro.graph_operators import format_report
from tvm_ethos.compiler import CompiledModel, IOSpec
from tvm_ethos.errors import TargetError, TvmEthosError
from tvm_ethos.pipeline.report import format_table

_DTYPES = {9: "int8", 3: "uint8", 7: "int16", 2: "int32", 0: "float32"}


class Placement(NamedTuple):
    """Where source operator ``index`` runs: ``ethos-u`` (in ethos-u operator ``operator``)
    or ``tflite-micro`` (copied unchanged; ``why`` says why the NPU does not run it). An
    operator the Ethos-U takes from the TFLite graph on its own (an SVDF, an LSTM: a
    graph-level NPU operator) has ``why`` say how it runs there, as its plan report does."""

    index: int
    kind: str
    placed_on: str
    operator: str
    why: str


class Decision(NamedTuple):
    """One source operator as the partition report's readers see it (``tflite_name``,
    ``placed_on``), in source order."""

    tflite_name: str
    placed_on: str


class Report(NamedTuple):
    operators: tuple[Decision, ...]


class Program(NamedTuple):
    """What readers of a compiled model's program find here: each ethos-u operator's
    payload by name."""

    payloads: dict


class TfliteMicroModel(CompiledModel):
    """The compiled ``.tflite`` (:attr:`tflite`), how its source's operators were placed
    (:attr:`placement`) and the plan report of each NPU group (:attr:`plan_reports`);
    ``report``, ``program.payloads`` and ``plan_report`` say the same for the readers of any
    compiled model (Vela's summary)."""

    def __init__(self, tflite: bytes, targets: str, accelerator: str,
                 placement: tuple[Placement, ...], plan_reports: tuple, payloads: dict):
        import tflite as reader

        g = reader.Model.GetRootAsModel(tflite, 0).Subgraphs(0)
        super().__init__(None, targets,
                         Report(tuple(Decision(p.kind, p.placed_on) for p in placement)),
                         _specs(g, g.InputsAsNumpy()), _specs(g, g.OutputsAsNumpy()),
                         program=Program(dict(payloads)),
                         plan_report=merged_plan_report(plan_reports))
        self.tflite = tflite
        self.source_tflite = None
        self.accelerator = accelerator
        self.placement = placement
        self.plan_reports = plan_reports
        self._graph = None
        #: what the ethos-u operators' streams did in the last :meth:`run` (emulated)
        self.last_stream_stats = None

    def run(self, *inputs) -> list[np.ndarray]:
        """One inference of the file (inputs as :meth:`CompiledModel.run` takes them). State
        tensors (an SVDF's, an LSTM's) carry over from one run to the next, as on a board."""
        arrays = self._ordered_inputs(inputs)
        if len(arrays) != len(self.inputs):
            raise TvmEthosError(f"the model takes {len(self.inputs)} input(s), "
                                f"{len(arrays)} given")
        checked = []
        for spec, x in zip(self.inputs, arrays):
            x = np.asarray(x)
            if tuple(x.shape) != tuple(spec.shape) or str(x.dtype) != spec.dtype:
                raise TvmEthosError(f"input {spec.name!r}: {x.dtype}{list(x.shape)}, expected "
                                    f"{spec.dtype}{list(spec.shape)}")
            checked.append(np.ascontiguousarray(x))
        if self._graph is None:
            self._graph = TfliteGraph(self.tflite, self.accelerator)
        outs, self.last_stream_stats = self._graph.run(checked)
        return self._shaped(list(outs))

    def reset(self) -> None:
        """Forgets the state tensors' values (an LSTM's, an SVDF's): the next :meth:`run`
        starts as a freshly started interpreter does."""
        if self._graph is not None:
            self._graph.reset()

    @property
    def executor(self):
        raise TargetError("a tflite-micro model has no TVM executor: it runs through run()")

    def start_async(self, *inputs):
        raise TargetError("a tflite-micro model runs one inference at a time: use run()")

    def run_vm(self, *inputs):
        raise TargetError("a tflite-micro model has no Relax VM executable: use run()")

    @property
    def partition_summary(self) -> dict:
        """Source operators per place, e.g. ``{"ethos-u": 30, "tflite-micro": 1}``."""
        out: dict[str, int] = {}
        for p in self.placement:
            out[p.placed_on] = out.get(p.placed_on, 0) + 1
        return dict(sorted(out.items()))

    @property
    def partition_report(self):
        return self.placement

    @property
    def plan_table(self) -> str:
        """Each NPU group's per-layer plan table, one after the other."""
        def table(r: dict) -> str:
            return format_report(r) if r.get("graph_operator") else format_table(r)

        if not self.plan_reports:
            kept = sum(p.kind == "ethos-u" for p in self.placement)
            return ("no operator on the Ethos-U: nothing to plan" if not kept else
                    f"no new operator on the Ethos-U: the model's {kept} ethos-u "
                    f"operator{'s are' if kept > 1 else ' is'} compiled already, kept as "
                    f"{'they are' if kept > 1 else 'it is'}")
        if len(self.plan_reports) == 1:
            return table(self.plan_reports[0])
        return "\n\n".join(f"NPU group {i}:\n{table(r)}"
                           for i, r in enumerate(self.plan_reports))

    @property
    def placement_table(self) -> str:
        """One line per source operator kept as a TFLite operator, saying why."""
        kept = [p for p in self.placement if p.placed_on != "ethos-u"]
        return "\n".join(f"operator {p.index} {p.kind}: {p.why}" for p in kept)

    def export_tflite(self, path, model=None) -> str:
        """Write the compiled file (``model`` is not needed: the file is already whole)."""
        path = os.fspath(path)
        with open(path, "wb") as f:
            f.write(self.tflite)
        return path

    def save(self, path) -> str:
        raise TargetError(
            "a model compiled for the tflite-micro host is a TFLite Micro .tflite, not a "
            "package: write it with export_tflite(path) (tvmc: --output-format tflite), or "
            "compile for 'ethos-u,llvm' for a package")

    def __repr__(self):
        return f"<TfliteMicroModel targets={self.targets!r} partition={self.partition_summary}>"


def merged_plan_report(reports: tuple) -> dict | None:
    """One plan report of the NPU groups, each group's subgraph names prefixed ``g<i>_`` as
    its ethos-u operator is named (:class:`Placement`'s ``operator``), one group's too:
    layers and streams side by side, cycles added, the peak the largest group's."""
    if not reports:
        return None
    named = [_named(r, f"g{i}_") for i, r in enumerate(reports)]
    if len(named) == 1:
        return named[0]
    out: dict = {"planned": any(r.get("planned") for r in reports),
                 "cycles": sum(r.get("cycles") or 0 for r in reports),
                 "peak_memory_bytes": max(r.get("peak_memory_bytes") or 0 for r in reports),
                 "layers": [], "subgraphs": {}, "streams": {}}
    for r in named:
        out["layers"] += r["layers"]
        out["subgraphs"].update(r["subgraphs"])
        out["streams"].update(r["streams"])
    return out


def _named(report: dict, prefix: str) -> dict:
    """``report`` with ``prefix`` before each of its subgraph names."""
    return dict(report,
                layers=[dict(row, subgraph=prefix + row["subgraph"])
                        for row in report.get("layers", [])],
                **{key: {prefix + k: v for k, v in (report.get(key) or {}).items()}
                   for key in ("subgraphs", "streams")})


def _specs(g, indices) -> list[IOSpec]:
    out = []
    for t in indices.tolist():
        ten = g.Tensors(t)
        shape = tuple(int(d) for d in ten.ShapeAsNumpy()) if ten.ShapeLength() else ()
        out.append(IOSpec(ten.Name().decode(), shape, _DTYPES.get(ten.Type(), str(ten.Type()))))
    return out
