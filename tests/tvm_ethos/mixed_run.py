"""The differential check of one mixed model (mixed_models.py): compiled for the Ethos-U with
the TFLite Micro host at the default budget and at the least memory the planner can plan it
in (so it cascades where it can), each written file run as a board runs it (the ``ethos-u``
operators on the functional model, the rest on TFLite Micro's kernels) against TFLite Micro
on the source model, output bytes equal; with ``llvm`` also the ``ethos-u,llvm`` package.

One difference is known and told apart, in the ``ethos-u,llvm`` package only: TFLite Micro
computes int8 LOGISTIC and TANH in gemmlowp's fixed point, LiteRT's reference kernels tabulate
them in float, and the two round a code differently at some input scales (1/256: a LOGISTIC's
output read by a TANH). The NPU's table is TFLite Micro's (rfcs/0007), so the ``ethos-u``
forms must equal TFLite Micro everywhere; the llvm host keeps LiteRT's table, its own
reference, so where the package runs such an operator on the llvm host and TFLite Micro
differs from LiteRT's reference kernels while ours equals LiteRT's, the run counts as an
``oracle_split``, not a mismatch.

Where TFLite Micro has no kernel for a drawn form (most uint8 operators: it refuses the model)
the oracle is LiteRT's reference kernels instead, and the model is compiled as an
``ethos-u,llvm`` package only (its host operators run on llvm, LiteRT's arithmetic; on the
tflite-micro host they would have no kernel either)."""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

import tvm_ethos
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_accepts
from tvm_ethos.backends.tflite_micro.reference import TflmReference


class Budget(enum.Enum):
    DEFAULT = "default"   # the device's SRAM
    TIGHT = "tight"       # the largest subgraph's least memory: every part cascaded if it can


class Outcome(NamedTuple):
    """What one model did: the operators per target, whether the tight plan cascaded
    (a plan of several parts), the subgraphs' least memory (estimated bytes), why operators
    stayed on the host, and whether TFLite Micro and LiteRT's reference kernels disagreed on
    an input (ours then equal to LiteRT's)."""
    placed: dict
    cascaded: bool
    tight_bytes: int
    host_reasons: tuple[str, ...]
    oracle_split: bool = False
    oracle: str = "tflm"


class Mismatch(AssertionError):
    """The compiled model's output differs from TFLite Micro's."""


class _LiteRTReference:
    """LiteRT's reference kernels (BUILTIN_REF) on a model TFLite Micro refuses."""

    def __init__(self, model: bytes):
        self._model = model

    def run(self, inputs) -> list[np.ndarray]:
        return oracle(self._model, inputs)


def _reference(model: bytes):
    """TFLite Micro's interpreter on ``model``, or LiteRT's reference kernels where TFLite
    Micro has no kernel for one of its operators (it refuses to prepare or to invoke it)."""
    return TflmReference(model) if tflm_accepts(model) == "ok" else _LiteRTReference(model)


def _differs(got: list, want: list) -> np.ndarray | None:
    """The absolute differences of the first output that differs, or None."""
    for g, w in zip(got, want):
        diff = np.abs(np.asarray(g).reshape(w.shape).astype(np.int64) - w.astype(np.int64))
        if diff.max() != 0:
            return diff
    return None


def _compare(cm, model: bytes, ref: TflmReference, rs, runs: int, what: str,
             llvm_host: bool = False) -> bool:
    """Whether TFLite Micro and LiteRT's reference kernels disagreed with ours equal to
    LiteRT's (``llvm_host``: a package whose host is llvm, LiteRT's kernels); ``Mismatch``
    where ours differs otherwise."""
    split = False
    for k in range(runs):
        xs = inputs_for(cm.inputs, rs)
        got, want = cm.run(*xs), ref.run(xs)
        if len(got) != len(want):
            raise Mismatch(f"{what}: {len(got)} outputs, TFLite Micro {len(want)}")
        diff = _differs(got, want)
        if diff is None:
            continue
        litert = oracle(model, xs)
        if (llvm_host and _differs(litert, want) is not None
                and _differs(got, litert) is None):
            split = True
            continue
        raise Mismatch(f"{what}, input {k}: {int((diff > 0).sum())} of {diff.size} "
                       f"codes differ, by up to {int(diff.max())}; first at "
                       f"{np.argwhere(diff)[0].tolist()}")
    return split


def _least_memory(cm) -> int:
    subs = (cm.plan_report or {}).get("subgraphs", {}).values()
    return max((s["smallest_memory_bytes"] for s in subs if s.get("planned")), default=0)


def _cascades(cm) -> bool:
    return any(len(p["parts"]) > 1 for s in (cm.plan_report or {}).get("subgraphs", {}).values()
               for p in s.get("plans", ()))


def check(model: bytes, seed: int = 0, runs: int = 2, llvm: bool = False) -> Outcome:
    """Raise ``Mismatch`` where a compiled form of ``model`` differs from TFLite Micro."""
    ref = _reference(model)
    tflm = isinstance(ref, TflmReference)
    target = "ethos-u" if tflm else "ethos-u,llvm"
    rs = np.random.RandomState(seed)
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    split = _compare(cm, model, ref, rs, runs, f"{target}, default budget", not tflm)
    tight = _least_memory(cm)
    cascaded = False
    if tight:
        ct = tvm_ethos.compile(model, target, cache_dir=False, budget=tight)
        split |= _compare(ct, model, ref, rs, runs, f"{target}, budget {tight} B", not tflm)
        cascaded = _cascades(ct)
    if llvm and tflm:
        cl = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
        split |= _compare(cl, model, ref, rs, runs, "ethos-u,llvm", llvm_host=True)
    reasons = tuple(f"{p.kind}: {p.why}" for p in getattr(cm, "placement", ())   # tflite-micro
                    if p.placed_on != "ethos-u")
    return Outcome(dict(cm.partition_summary), cascaded, tight, reasons, split,
                   "tflm" if tflm else "litert")
