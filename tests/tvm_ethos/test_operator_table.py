"""rfcs/0010's operator table kept true: one row per operator of Vela 5.2's Ethos-U55/U65 list,
and per row a one-operator model (``operator_models``) compiled for ``ethos-u`` (the
tflite-micro host) that lands where the row's "Ours" cell says, its outputs equal to the
oracle the row names.

"Ours" is NPU (an ``ethos-u`` operator: a command stream), emulator (on the NPU for
``ethos-u,llvm``, whose TIR emulator runs it, but no stream, so the tflite-micro host keeps it
a TFLite operator), TFLite (the host keeps it a TFLite operator) or refused (no compile).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import numpy as np
import operator_models
import pytest

import tvm_ethos
from benchmarks.real_models import vela_cpu_indices, vela_size
from tests.helpers.models import MODELS_DIR
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_oracle
from tvm_ethos.errors import TvmEthosError
from tvm_ethos.reports.tflite_ops import operator_kinds

regor = pytest.importorskip("ethosu.regor")
pytest.importorskip("tflite_micro")

TABLE = Path(__file__).resolve().parents[2] / "rfcs" / "0010-ethos-u-operators.md"
PLACES = ("NPU", "emulator", "TFLite", "refused")
ORACLES = ("TFLM", "LiteRT", "-")
COLUMNS = ("Operator", "Vela 5.2 on Ethos-U55/U65", "Ours", "Model", "Oracle", "Notes")


class Row(NamedTuple):
    operator: str
    vela: str
    ours: str
    model: str
    oracle: str
    notes: str


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` is a pipe inside a cell)."""
    return [c.strip().strip("`") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def read_table(path: Path = TABLE) -> list[Row]:
    """The rows between the table's markers; a malformed row fails here, naming its line."""
    text = path.read_text()
    m = re.search(r"<!-- operator-table -->\n(.*?)<!-- /operator-table -->", text, re.S)
    assert m, f"{path.name}: no <!-- operator-table --> ... <!-- /operator-table --> block"
    lines = [ln for ln in m.group(1).splitlines() if ln.startswith("|")]
    header = tuple(_cells(lines[0]))
    assert header == COLUMNS, f"{path.name}: columns {header}, expected {COLUMNS}"
    rows = []
    for ln in lines[2:]:
        cells = [c.replace("\\|", "|") for c in _cells(ln)]
        assert len(cells) == len(COLUMNS), f"{path.name}: row {ln!r} has {len(cells)} cells"
        rows.append(Row(*cells))
    return rows


ROWS = read_table()


def _vela_list(accelerator: str) -> set[str]:
    names = regor.tflite_operator_constraints(accelerator)
    return {n.replace("ARGMAX", "ARG_MAX") for n in names}


# --------------------------------------------------------------------------- the table itself
def test_the_table_lists_vela_5_2s_operators_for_ethos_u55_and_u65_once_each():
    ops = [r.operator for r in ROWS]
    repeated = sorted({o for o in ops if ops.count(o) > 1})
    assert not repeated, f"repeated rows: {repeated}"
    for acc in ("EthosU55", "EthosU65"):
        vela = _vela_list(acc)
        assert set(ops) == vela, (f"missing {sorted(vela - set(ops))}, "
                                  f"not Vela's ({acc}) {sorted(set(ops) - vela)}")


def test_every_row_is_well_formed():
    for r in ROWS:
        assert r.ours in PLACES, f"{r.operator}: Ours {r.ours!r} is none of {PLACES}"
        assert r.oracle in ORACLES, f"{r.operator}: Oracle {r.oracle!r} is none of {ORACLES}"
        assert r.vela, f"{r.operator}: Vela's constraints are empty"
        if r.model == "-":
            assert r.notes, f"{r.operator}: no model and no note saying why"
        else:
            assert r.model in operator_models.MODELS, f"{r.operator}: no builder {r.model!r}"
        if r.oracle == "-" or r.ours == "refused":
            assert r.notes, f"{r.operator}: no oracle and no note saying why"


# --------------------------------------------------------------------------- one model a row
BUILT = [r for r in ROWS if r.model != "-"]


@pytest.mark.parametrize("row", BUILT, ids=[r.operator for r in BUILT])
def test_the_one_operator_model_lands_where_the_table_says_with_the_oracles_outputs(row):
    data = operator_models.MODELS[row.model]()
    kinds = [k for k, _ in operator_kinds(data)]
    assert kinds == [row.operator], f"builder {row.model} builds another model"
    if row.ours == "refused":
        with pytest.raises(TvmEthosError):
            tvm_ethos.compile(data, "ethos-u", cache_dir=False)
        return
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    want = "ethos-u" if row.ours == "NPU" else "tflite-micro"
    assert placed.placed_on == want, (
        f"{row.operator} is placed on {placed.placed_on} ({placed.why}); the table says "
        f"{row.ours}: update its cell in {TABLE.name}")
    if row.ours == "emulator":
        emu = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
        assert set(emu.partition_summary) == {"ethos-u"}, (
            f"{row.operator} for ethos-u,llvm: {emu.partition_summary}, not the NPU's emulator")
    if row.oracle == "-":
        return
    rs = np.random.RandomState(0)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        want_out = tflm_oracle(data, xs) if row.oracle == "TFLM" else oracle(data, xs)
        cm.reset()   # the oracle is a fresh interpreter: no state from the run before
        got = cm.run(*xs)
        assert len(got) == len(want_out)
        for g, w in zip(got, want_out):
            assert g.size == w.size
            assert np.array_equal(g.reshape(w.shape).astype(np.int64), w.astype(np.int64)), (
                f"{row.operator}: {g.ravel()[:8]} vs {row.oracle} {w.ravel()[:8]}")


# --------------------------------------------------------------------- partition like Vela
def test_vela_s_cpu_operators_are_matched_back_to_the_source_operators():
    """benchmarks/real_models.py's NPU>=Vela column: Vela Size's operators left on the CPU of
    keyword_scrambled_8bit (its SVDFs and the int16 output's QUANTIZE) found by index in the
    source, as many as Vela's summary counts."""
    path = MODELS_DIR / "tflite-micro" / "keyword_scrambled_8bit.tflite"
    if not path.exists():
        pytest.skip(f"model {path} not available (set TVM_ETHOS_MODELS)")
    source = path.read_bytes()
    vela = vela_size(str(path), "ethos-u55-128")
    kept = vela_cpu_indices(source, vela["tflite"])
    kinds = [k for k, _ in operator_kinds(source)]
    assert kept is not None and len(kept) == vela["cpu"]
    assert sorted(kinds[i] for i in kept) == ["QUANTIZE"] + ["SVDF"] * 7
    assert kept == {i for i, k in enumerate(kinds) if k == "SVDF"} | {len(kinds) - 1}
    # a file whose operators are not the source's is not matched
    assert vela_cpu_indices(operator_models.MODELS["conv2d"](), vela["tflite"]) is None
