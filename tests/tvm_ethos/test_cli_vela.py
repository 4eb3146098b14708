"""A Vela user's ``tvmc`` (issue 27): output files named for what they are, Vela's options with
Vela's meanings, Vela's summary and per-layer CSVs checked against Vela's own for the same
model and flags, MACs as Vela counts them, the TFLite Micro arena line, and ``tvmc run`` on
``.tflite`` files with ``ethos-u`` operators (ours and Vela's) against TFLite's reference
kernels."""
import argparse
import configparser
import csv
import os
import re
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import pytest
import tflite_builder as tb
from conftest import model_path, oracle, random_inputs
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli_compile import call, one_line_error

from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from planner.budgets import SIZE_SOURCE
from planner.size_choice import SizeObjective
from tvm_ethos.cli_compile import output_file
from tvm_ethos.reports.tflite_ops import TfliteOperator, read_operators
from tvm_ethos.reports.vela_summary import layers, placements

pytest.importorskip("ethosu.vela")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VELA = os.path.join(os.path.dirname(sys.executable), "vela")
#: A Vela user's command line, given to Vela and to tvmc compile alike.
VELA_FLAGS = ["--accelerator-config", "ethos-u55-128", "--optimise", "Size",
              "--system-config", "Ethos_U55_High_End_Embedded", "--memory-mode", "Shared_Sram",
              "--verbose-performance"]


def run_vela(model, out_dir, flags=()):
    """Vela 5.2's CLI on ``model``; its summary CSV's one row."""
    done = subprocess.run([VELA, str(model), "--output-dir", str(out_dir), *flags],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (summary,) = [f for f in os.listdir(out_dir) if "_summary_" in f]
    return read_csv(os.path.join(out_dir, summary))[0]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def header(path):
    with open(path, newline="") as f:
        return next(csv.reader(f))


@pytest.fixture(scope="module")
def kws():
    return str(model_path("ds_cnn_kws"))


@pytest.fixture(scope="module")
def same_flags(kws, tmp_path_factory):
    """ds_cnn_kws through Vela and through tvmc compile with the same Vela flags."""
    d = tmp_path_factory.mktemp("vela_flags")
    run_vela(kws, d / "vela", VELA_FLAGS)
    rc, out, err = call(["compile", kws, "--target", "ethos-u,llvm", *VELA_FLAGS,
                         "--output-dir", str(d / "ours"), "--planner-report",
                         str(d / "plan.json")])
    assert rc == 0, err
    return {"vela": d / "vela", "ours": d / "ours", "stdout": out, "plan": d / "plan.json"}


# ----------------------------------------------------------------------------- 1. files never lie


@pytest.mark.parametrize("output, fmt, output_dir, want", [
    ("k.tflite", None, None, ("k.tflite", "tflite")),
    ("k.TFLITE", None, None, ("k.TFLITE", "tflite")),
    ("k.tar", None, None, ("k.tar", "package")),
    ("k.zip", "package", None, ("k.zip", "package")),
    ("k.bin", None, None, ("k.bin", "package")),
    (None, None, None, ("module.tar", "package")),
    (None, "tflite", None, ("module.tflite", "tflite")),
    (None, None, "d", (os.path.join("d", "kws_tvm_ethos.tflite"), "tflite")),
    (None, "package", "d", (os.path.join("d", "kws_tvm_ethos.tar"), "package")),
])
def test_the_format_follows_the_name_and_the_name_the_format(output, fmt, output_dir, want):
    class Targets:
        ids = ("ethos-u", "llvm")

    args = argparse.Namespace(output=output, output_format=fmt, output_dir=output_dir,
                              model="models/kws.tflite")
    assert output_file(args, Targets) == want


@pytest.mark.parametrize("output, fmt", [("k.tflite", "package"), ("k.tar", "tflite"),
                                         ("k.zip", "tflite"), ("k.bin", "tflite")])
def test_a_format_contradicting_the_name_is_one_line(kws, tmp_path, output, fmt):
    path = tmp_path / output
    rc, _, err = call(["compile", kws, "--target", "ethos-u,llvm", "-o", str(path),
                       "--output-format", fmt])
    one_line_error(rc, err, "compile", "contradicts", output)
    assert not path.exists()


def test_without_o_the_default_name_has_the_formats_extension(tmp_path, monkeypatch):
    """--output-format tflite alone writes module.tflite (a TFLite file) and says so; the
    file runs with tvmc run, bit-exact with TFLite's reference kernels."""
    model = tmp_path / "conv.tflite"
    model.write_bytes(tb.conv_resize_conv(np.random.RandomState(0)))
    monkeypatch.chdir(tmp_path)
    rc, out, err = call(["compile", str(model), "--target", "ethos-u,llvm",
                         "--output-format", "tflite", "-q"])
    assert rc == 0, err
    assert out.splitlines()[0] == "wrote module.tflite"
    data = (tmp_path / "module.tflite").read_bytes()
    assert data[4:8] == b"TFL3" and not (tmp_path / "module.tar").exists()
    xs = random_inputs(str(model), np.random.RandomState(1))
    np.savez(tmp_path / "in.npz", *xs)
    rc, out, err = call(["run", "module.tflite", "--inputs", "in.npz", "--outputs", "o.npz"])
    assert rc == 0, err
    assert "2 ethos-u operators emulated" in out and "1 host operator" in out, out
    got = np.load(tmp_path / "o.npz")
    for i, ref in enumerate(oracle(str(model), xs)):
        assert np.array_equal(got[f"output_{i}"].reshape(ref.shape), ref)


# ----------------------------------------------------------------------------- 2. Vela's options


def test_a_vela_command_line_writes_the_files_vela_writes(same_flags):
    vela, ours = sorted(os.listdir(same_flags["vela"])), sorted(os.listdir(same_flags["ours"]))
    assert [f.replace("_vela.", "_tvm_ethos.") for f in vela] == ours
    assert "ds_cnn_kws_summary_Ethos_U55_High_End_Embedded.csv" in ours
    data = (same_flags["ours"] / "ds_cnn_kws_tvm_ethos.tflite").read_bytes()
    assert len(read_ethos_u_ops(data)) == 1


def test_optimise_size_reports_the_objective_it_minimised(same_flags):
    """--optimise Size plans at the 'size' budget (planner.size_choice): the plan report and
    the printed plan state the objective, SRAM plus estimated command-stream bytes, with each
    term and the weight DMA that breaks ties; its SRAM is the chosen plan's peak."""
    import json

    rep = json.loads(same_flags["plan"].read_text())
    (sub,) = rep["subgraphs"].values()
    assert sub["budget_source"] == SIZE_SOURCE
    assert f"budget: {SIZE_SOURCE}" in same_flags["stdout"]
    objective = sub["size_objective"]
    assert objective["memory_bytes"] == sub["peak_memory_bytes"]
    assert objective["total_bytes"] == objective["memory_bytes"] + objective["stream_bytes"]
    assert objective["dma_bytes"] >= 0
    assert objective["stream_bytes"] > 0
    assert SizeObjective.from_json(objective).line() in same_flags["stdout"]
    assert sub["smallest_memory_bytes"] <= sub["peak_memory_bytes"] < \
        sub["frontier"][-1]["memory_bytes"]


def test_optimise_size_must_fit_the_arena(kws, tmp_path):
    rc, _, err = call(["compile", kws, "--target", "ethos-u,llvm", "--optimise", "Size",
                       "--arena-cache-size", "10000", "-o", str(tmp_path / "k.tflite")])
    line = one_line_error(rc, err, "compile", "more than the 10000 bytes")
    assert int(re.search(r"the smallest plan needs (\d+) bytes", line).group(1)) > 10000
    assert not (tmp_path / "k.tflite").exists()


def test_a_users_config_file_is_read_with_velas_parser(kws, tmp_path):
    """--config my.ini defines a system and a memory mode as Vela reads them: the arena is the
    plan's budget (Performance: the fastest within it) and the memories' timings are Vela's."""
    from ethosu.vela.architecture_features import CONFIG_FILES_PATH, ArchitectureFeatures
    from ethosu.vela.tensor import MemArea

    shipped = configparser.ConfigParser()
    shipped.read(os.path.join(CONFIG_FILES_PATH, "Arm", "vela.ini"))
    mine = configparser.ConfigParser()
    mine["System_Config.My_Board"] = dict(shipped["System_Config.Ethos_U55_Deep_Embedded"])
    mine["Memory_Mode.My_Arena"] = dict(shipped["Memory_Mode.Shared_Sram"])
    mine["Memory_Mode.My_Arena"]["arena_cache_size"] = "16000"
    ini = tmp_path / "my.ini"
    with open(ini, "w") as f:
        mine.write(f)
    rep_path = tmp_path / "plan.json"
    rc, out, err = call(["compile", kws, "--target", "ethos-u,llvm", "--config", str(ini),
                         "--system-config", "My_Board", "--memory-mode", "My_Arena",
                         "--output-dir", str(tmp_path / "out"), "--planner-report",
                         str(rep_path), "-q"])
    assert rc == 0, err
    import json

    rep = json.loads(rep_path.read_text())
    (sub,) = rep["subgraphs"].values()
    assert sub["budget_bytes"] == 16000 and sub["peak_memory_bytes"] <= 16000
    arch = ArchitectureFeatures(vela_config_files=[str(ini)], system_config="My_Board",
                                memory_mode="My_Arena", accelerator_config="ethos-u55-128",
                                max_blockdep=3, verbose_config=False, arena_cache_size=None)
    pools = rep["options"]["memory_pools"]
    assert pools["sram"]["size"] == arch.arena_cache_size == 16000
    assert pools["flash"]["read_bytes_per_cycle"] == arch.memory_bandwidths_per_cycle[
        MemArea.OffChipFlash]
    assert pools["sram"]["read_bytes_per_cycle"] == arch.memory_bandwidths_per_cycle[MemArea.Sram]
    row = read_csv(tmp_path / "out" / "ds_cnn_kws_summary_My_Board.csv")[0]
    assert (row["system_config"], row["memory_mode"]) == ("My_Board", "My_Arena")
    assert float(row["core_clock"]) == arch.core_clock
    assert out.splitlines()[-1] == f"wrote {tmp_path / 'out' / 'ds_cnn_kws_summary_My_Board.csv'}"


@pytest.mark.parametrize("target, flags, words", [
    ("ethos-u,llvm", ["--system-config", "Nope"],
     ["--system-config 'Nope' is not defined", "Ethos_U55_High_End_Embedded"]),
    ("ethos-u,llvm", ["--system-config", "Ethos_U55_High_End_Embedded", "--memory-mode", "Nope"],
     ["--memory-mode 'Nope' is not defined", "Shared_Sram"]),
    ("ethos-u,llvm", ["--config", "missing/nowhere.ini", "--system-config", "X"],
     ["--config", "not a readable file"]),
    ("ethos-u,llvm", ["--config", "settings.txt"], ["end in .ini"]),
    ("ethos-u,llvm", ["--optimise", "Size", "--budget", "300KiB"], ["give one"]),
    ("ethos-u,llvm", ["--optimise", "Fast"], ["invalid choice: 'Fast'"]),
    ("ethos-u,llvm", ["--arena-cache-size", "lots"], ["number of bytes"]),
    ("ethos-u,llvm", ["--system-config", "Ethos_U55_High_End_Embedded", "--workspace-pools",
                      "sram:1MiB"], ["--workspace-pools", "give one"]),
    ("ethos-n,llvm", ["--accelerator-config", "ethos-u55-64"], ["has none"]),
    ("ethos-n,llvm", ["--system-config", "Ethos_U55_High_End_Embedded"], ["has no ethos-u"]),
    ("ethos-u -accelerator_config=ethos-u55-64,llvm", ["--accelerator-config", "ethos-u55-128"],
     ["differ"]),
    ("ethos-u,llvm", ["--target-ethos-u-accelerator_config=ethos-u55-64",
                      "--accelerator-config", "ethos-u55-128"], ["differ"]),
])
def test_bad_vela_options_are_one_line_before_any_work(kws, tmp_path, target, flags, words):
    out = tmp_path / "o"
    rc, _, err = call(["compile", kws, "--target", target, "--output-dir", str(out), *flags])
    one_line_error(rc, err, "compile", *words)
    assert not out.exists() or os.listdir(out) == []


def test_config_paths_resolve_as_velas(tmp_path, monkeypatch):
    """``Vendor/file.ini`` is one of Vela's shipped files, any other name a path."""
    from ethosu.vela.architecture_features import CONFIG_FILES_PATH

    from tvm_ethos.vela_options import config_path

    assert config_path("Arm/vela.ini") == os.path.join(CONFIG_FILES_PATH, "Arm", "vela.ini")
    mine = tmp_path / "sub" / "my.ini"
    mine.parent.mkdir()
    mine.write_text("")
    assert config_path(str(mine)) == str(mine)
    monkeypatch.chdir(tmp_path)
    assert config_path("./sub/my.ini") == os.path.join("sub", "my.ini")


def test_a_config_file_vela_cannot_read_is_one_line(kws, tmp_path):
    ini = tmp_path / "bad.ini"
    ini.write_text("[System_Config.Bad]\ncore_clock=fast\n[Memory_Mode.M]\n"
                   "const_mem_area=Axi1\n")
    rc, _, err = call(["compile", kws, "--target", "ethos-u,llvm", "--config", str(ini),
                       "--system-config", "Bad", "--memory-mode", "M"])
    one_line_error(rc, err, "compile", "Vela cannot read the system Bad / M", "'fast'")


def test_without_vela_its_system_options_say_what_to_install(kws, tmp_path, monkeypatch):
    from tvm_ethos import vela_options

    monkeypatch.setattr(vela_options, "vela_installed", lambda: False)
    rc, _, err = call(["compile", kws, "--target", "ethos-u,llvm", "--system-config",
                       "Ethos_U55_High_End_Embedded", "-o", str(tmp_path / "k.tflite")])
    one_line_error(rc, err, "compile", "Vela's parser", "tvm-ethos[vela]")


def test_the_readme_maps_every_vela_option():
    """Every option of Vela 5.2's CLI (read from its vela.py) has a row in the README's table,
    and every one the table says tvmc compile takes is one of its options."""
    import ethosu.vela.vela as vela_cli

    with open(vela_cli.__file__) as f:
        velas = set(re.findall(r'add_argument\(\s*"(--[a-z0-9-]+)"', f.read()))
    assert {"--optimise", "--system-config", "--arena-cache-size"} <= velas
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    table = readme.split("| Vela 5.2 | tvm-ethos |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines():
        first, ours = line.strip("|").split(" | ", 1)
        rows.update({flag: ours.strip() for flag in re.findall(r"`(--[a-z0-9-]+)`", first)})
    assert sorted(velas - set(rows)) == []
    rc, helptext, _ = call(["compile", "--help"])
    for flag, ours in rows.items():
        if ours.startswith("the same"):
            assert re.search(rf"\s{re.escape(flag)}[\s=]", helptext), flag
    # a row that calls its options deprecated names only options Vela's help marks so
    vela = os.path.join(os.path.dirname(sys.executable), "vela")
    velahelp = subprocess.run([vela, "--help"], capture_output=True, text=True,
                              check=True).stdout
    entries = dict(re.findall(r"\n  (--[a-z0-9-]+)(.*?)(?=\n  -|\Z)", velahelp, re.S))
    deprecated = {flag for flag, ours in rows.items() if ours.startswith("not taken: deprecated")}
    assert deprecated and sorted(f for f in deprecated if "[DEPRECATED]" not in entries[f]) == []


# ----------------------------------------------------------------------------- 3. Vela's reports


def test_summary_csv_has_velas_columns_and_values(same_flags):
    ours_path = same_flags["ours"] / "ds_cnn_kws_summary_Ethos_U55_High_End_Embedded.csv"
    vela_path = same_flags["vela"] / "ds_cnn_kws_summary_Ethos_U55_High_End_Embedded.csv"
    ours, velas = header(ours_path), header(vela_path)
    shared = [c for c in ours if c in velas]
    assert shared == [c for c in velas if c in ours]          # Vela's order
    assert {"nn_macs", "sram_memory_used", "off_chip_flash_memory_used", "cycles_total",
            "sram_bandwidth", "off_chip_flash_bandwidth", "inference_time"} <= set(shared)
    assert all(c.startswith("tvm_ethos_") for c in ours if c not in velas)
    mine, theirs = read_csv(ours_path)[0], read_csv(vela_path)[0]
    for col in ("experiment", "network", "accelerator_configuration", "system_config",
                "memory_mode", "core_clock", "arena_cache_size", "sram_bandwidth",
                "dram_bandwidth", "on_chip_flash_bandwidth", "off_chip_flash_bandwidth",
                "weights_storage_area", "feature_map_storage_area", "batch_size", "nn_macs"):
        assert mine[col] == theirs[col], col
    assert int(mine["tvm_ethos_computed_macs"]) >= int(mine["nn_macs"])


def test_per_layer_csv_is_keyed_by_the_models_names_as_velas(same_flags, kws):
    ours_path = same_flags["ours"] / "ds_cnn_kws_per-layer.csv"
    vela_path = same_flags["vela"] / "ds_cnn_kws_per-layer.csv"
    ours, velas = header(ours_path), header(vela_path)
    shared = [c for c in ours if c in velas]
    assert shared == [c for c in velas if c in ours]
    assert {"Original Operator", "Op Cycles", "MAC Count", "Name"} <= set(shared)
    mine = {r["Name"]: r for r in read_csv(ours_path)}
    with open(kws, "rb") as f:
        assert list(mine) == [op.name for op in read_operators(f.read())]
    whole = [r for r in read_csv(vela_path) if r["NNG Operator"] == r["Original Operator"]]
    assert len(whole) >= 10
    for r in whole:            # operators Vela did not split: same type, same MACs
        assert mine[r["Name"]]["Original Operator"] == r["Original Operator"]
        assert mine[r["Name"]]["MAC Count"] == r["MAC Count"], r["Name"]
    assert all(re.fullmatch(r"l\d+_\w+", r["Part"]) for r in mine.values())
    printed = same_flags["stdout"]
    assert "Per-layer performance (Op Cycles estimated by the planner)" in printed
    assert all(name in printed for name in mine)


@pytest.mark.parametrize("name", ["mobilenet_v1_0.25_96", "resnet8_cifar", "mobilenet_v1_1.0_224",
                                  "tflite-micro/person_detect", "tflite-micro/hello_world_int8"])
def test_network_macs_are_velas(name, tmp_path):
    """MACs counted once per operator from the file, as Vela 5.2 counts them (its nn_macs),
    for every shipped model Vela puts wholly on the NPU."""
    path = model_path(name)
    row = run_vela(path, tmp_path, ["--accelerator-config", "ethos-u55-128"])
    with open(path, "rb") as f:
        assert sum(op.macs for op in read_operators(f.read())) == int(row["nn_macs"])


def velas_per_layer(model, out_dir, original: str, nng: str) -> list[int]:
    """The MAC counts of Vela 5.2's per-layer rows (ethos-u55-128) that its NPU runs for the
    model's ``original`` operators as ``nng`` operations."""
    run_vela(model, out_dir, ["--accelerator-config", "ethos-u55-128", "--verbose-performance"])
    (name,) = [f for f in os.listdir(out_dir) if f.endswith("_per-layer.csv")]
    return [int(r["MAC Count"]) for r in read_csv(os.path.join(out_dir, name))
            if (r["Original Operator"].strip(), r["NNG Operator"].strip(),
                r["Target"].strip()) == (original, nng, "NPU")]


def test_a_quantize_counts_as_velas(tmp_path):
    """keyword_scrambled_8bit's first QUANTIZE, which Vela runs on its NPU (it keeps the
    last one on the CPU), counts one MAC per output element, as Vela's row for it."""
    path = model_path("tflite-micro/keyword_scrambled_8bit")
    (velas,) = velas_per_layer(path, tmp_path, "Quantize", "Quantize")
    with open(path, "rb") as f:
        first = next(op for op in read_operators(f.read()) if op.builtin == "QUANTIZE")
    assert first.macs == velas > 0


def test_an_lstm_counts_its_gates_products_as_velas(tmp_path):
    """trained_lstm_int8's LSTM counts what Vela's own LSTM counts in its fully connected
    operations (4 gates x 2 products x 28 steps), not the 1x1 pools Vela adds."""
    path = model_path("tflite-micro/trained_lstm_int8")
    velas = velas_per_layer(path, tmp_path, "UnidirectionalSequenceLstm", "FullyConnected")
    with open(path, "rb") as f:
        (lstm,) = [op for op in read_operators(f.read())
                   if op.builtin == "UNIDIRECTIONAL_SEQUENCE_LSTM"]
    assert len(velas) == 4 * 2 * 28
    assert lstm.macs == sum(velas) > 0


@pytest.mark.parametrize("name", ["tflite-micro/keyword_scrambled_8bit",
                                  "tflite-micro/trained_lstm_int8"])
def test_every_estimated_cycle_is_on_its_operators_row(name, tmp_path):
    """Graph-level operators (the SVDFs, each planned alone; an LSTM planned with its
    neighbours) and the NPU groups between them: every operator's per-layer row holds its
    own Part and estimate, and the rows add up to the summary's cycles."""
    network = os.path.basename(name)
    rc, _, err = call(["compile", str(model_path(name)), "--target", "ethos-u",
                       "--accelerator-config", "ethos-u55-128", "--verbose-performance",
                       "--output-dir", str(tmp_path)])
    assert rc == 0, err
    rows = read_csv(tmp_path / f"{network}_per-layer.csv")
    (summary,) = read_csv(tmp_path / f"{network}_summary_Ethos_U55_High_End_Embedded.csv")
    assert all(r["Target"] == "NPU" and r["Part"] and int(r["Op Cycles"]) > 0 for r in rows)
    assert sum(int(r["Op Cycles"]) for r in rows) == int(summary["cycles_total"])
    # each row names the ethos-u operator that runs it, and a Part once within it
    owned = [(r["NPU Operator"], r["Part"]) for r in rows]
    assert all(op for op, _ in owned) and len(set(owned)) == len(owned)
    assert all(int(r["MAC Count"]) > 0 for r in rows if r["Original Operator"] in
               ("Svdf", "UnidirectionalSequenceLstm", "Quantize"))


@pytest.fixture(scope="module")
def systems():
    from tvm_ethos.vela_options import read_system

    return {a: read_system(a) for a in ("ethos-u55-128", "ethos-u65-256")}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["ethos-u55-128", "ethos-u65-256"]), st.integers(0, 1 << 24),
       st.integers(0, 1 << 20), st.integers(0, 1 << 24), st.integers(0, 10 ** 7))
def test_memory_used_is_counted_where_velas_system_puts_it(systems, acc, scratch, fast, flash,
                                                           cycles):
    """The arena in the feature maps' memory, the fast scratch in SRAM, the flash in the
    weights' memory (Vela's default U55: SRAM and off-chip flash; U65: DRAM for both and
    its SRAM for the fast scratch), nothing lost; no cycles, no time."""
    from tvm_ethos.reports.vela_summary import Arena, Summary

    system = systems[acc]
    s = Summary("m", system, scratch, fast, flash, cycles, 0, None, 1, 0, {}, Arena(scratch, fast))
    used = s.memory_used()
    assert sum(used.values()) == scratch + fast + flash
    if acc.startswith("ethos-u55"):
        assert used == {"sram": scratch + fast, "dram": 0, "on_chip_flash": 0,
                        "off_chip_flash": flash}
    else:
        assert used == {"sram": fast, "dram": scratch + flash, "on_chip_flash": 0,
                        "off_chip_flash": 0}
    row, text = s.csv_row(), s.text()
    assert row["sram_memory_used"] == used["sram"] / 1024
    if cycles:
        assert row["cycles_total"] == cycles and float(row["inference_time"]) > 0
        assert re.search(rf"\nNPU cycles \(estimated\) +{cycles} cycles/batch\n", text)
    else:
        assert row["cycles_total"] == row["inference_time"] == ""
        assert "NPU cycles: none estimated (not planned)" in text


_KINDS = ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "SOFTMAX",
          "RESHAPE", "ADD", "MEAN"]
_PART = {"AVERAGE_POOL_2D": "avg_pool2d", "DEPTHWISE_CONV_2D": "depthwise_conv2d",
         "CONV_2D": "conv2d", "FULLY_CONNECTED": "fully_connected"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KINDS), st.booleans()), min_size=1, max_size=20))
def test_each_plan_layer_is_matched_with_its_own_operator(ops):
    """The plan's parts are the model's NPU operators in order: with the partition report's
    placements every part lands on the operator it came from and every operator on its
    target; a report that does not name the reshapes still places them when it puts all of
    them on one side."""
    tops = [TfliteOperator(i, k, k, f"t{i}", i + 1) for i, (k, _) in enumerate(ops)]
    planned = [i for i, (_, on_npu) in enumerate(ops) if on_npu]
    plan = [{"part": f"l{j}_{_PART.get(ops[i][0], ops[i][0].lower())}", "src": i}
            for j, i in enumerate(planned)]
    reshapes_on = {on for k, on in ops if k == "RESHAPE"}
    decisions = [Decision("?" if k == "RESHAPE" and len(reshapes_on) == 1 else k,
                          "ethos-u" if on else "llvm") for k, on in ops]
    placed = placements(tops, decisions)
    assert placed == [on for _, on in ops]
    rows = layers(tops, plan, placed)
    assert [r.op for r in rows] == tops
    assert [r.plan["src"] for r in rows if r.plan] == planned
    assert [r.target for r in rows] == ["NPU" if on else "CPU" for _, on in ops]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 3)), min_size=1,
                max_size=20), st.randoms(use_true_random=False))
def test_each_part_is_matched_within_its_own_npu_operator(ops, rnd):
    """Where the model says which ethos-u operator runs each source operator, each subgraph's
    parts (numbered from l0 in every subgraph) land on that subgraph's operators, whatever
    order the report lists the subgraphs in."""
    tops = [TfliteOperator(i, k, k, f"t{i}", i + 1) for i, (k, _) in enumerate(ops)]
    owners = [f"g{g}" for _, g in ops]
    by_group: dict[str, list[int]] = {}
    for i, o in enumerate(owners):
        by_group.setdefault(o, []).append(i)
    groups = list(by_group)
    rnd.shuffle(groups)
    plan = [{"part": f"l{j}_{_PART.get(ops[i][0], ops[i][0].lower())}", "subgraph": g,
             "src": i} for g in groups for j, i in enumerate(by_group[g])]
    rows = layers(tops, plan, [True] * len(ops), owners)
    assert [r.plan["src"] for r in rows] == list(range(len(ops)))


class Decision(NamedTuple):
    tflite_name: str
    placed_on: str


# ------------------------------------------------------------- the arena line; 4. tvmc run .tflite


def test_u65_arena_line_is_the_written_files_and_the_file_runs(kws, tmp_path):
    """On an Ethos-U65 the one arena line gives the scratch (tensor arena) and fast scratch
    (SRAM) the written file's ethos-u operator declares; tvmc run finds the U65 in the file
    and its outputs are TFLite's."""
    import json

    out, rep_path = tmp_path / "kws.tflite", tmp_path / "plan.json"
    rc, stdout, err = call(["compile", kws, "--target", "ethos-u,llvm", "--accelerator-config",
                            "ethos-u65-256", "-o", str(out), "--verbose-allocation",
                            "--planner-report", str(rep_path)])
    assert rc == 0, err
    (sub,) = json.loads(rep_path.read_text())["subgraphs"].values()
    cascades = re.findall(r"^  cascade +(\d+) +\S+ +([\d,]+) B  (.*)$", stdout, re.M)
    assert [(int(k), int(b.replace(",", "")), parts.split(", ")) for k, b, parts in cascades] \
        == [(k, p["planned_bytes"], p["parts"]) for k, p in enumerate(sub["plans"])]
    (op,) = read_ethos_u_ops(out.read_bytes())
    assert op.scratch_fast_bytes > 0
    arena = [ln for ln in stdout.splitlines() if ln.startswith("TFLite Micro arena")]
    assert arena and set(arena) == {
        f"TFLite Micro arena for the ethos-u operators: scratch {op.scratch_bytes:,} B in the "
        f"tensor arena (plus the host operators' tensors), fast scratch "
        f"{op.scratch_fast_bytes:,} B (the ethos-u65-256's SRAM, given to the NPU driver)"}
    assert "Total DRAM used" in stdout and "Ethos_U65_Client_Server" in stdout
    xs = random_inputs(kws, np.random.RandomState(3))
    np.save(tmp_path / "x.npy", xs[0])
    rc, printed, err = call(["run", str(out), "--inputs", str(tmp_path / "x.npy"),
                             "--outputs", str(tmp_path / "o.npz")])
    assert rc == 0, err
    assert "emulated on the functional ethos-u65-256 model" in printed
    assert np.array_equal(np.load(tmp_path / "o.npz")["output_0"], oracle(kws, xs)[0])


def test_tvmc_run_runs_velas_tflite(same_flags, kws, tmp_path):
    velas = str(same_flags["vela"] / "ds_cnn_kws_vela.tflite")
    xs = random_inputs(kws, np.random.RandomState(7))
    np.savez(tmp_path / "in.npz", xs[0])
    rc, printed, err = call(["run", velas, "--inputs", str(tmp_path / "in.npz"), "--outputs",
                             str(tmp_path / "o.npz"), "--print-top", "2"])
    assert rc == 0, err
    assert printed.splitlines()[0].startswith("ran the .tflite: 1 ethos-u operator emulated on "
                                              "the functional ethos-u55-128 model")
    ref = oracle(kws, xs)[0]
    assert np.array_equal(np.load(tmp_path / "o.npz")["output_0"], ref)
    top = int(np.argmax(ref.reshape(-1)))
    assert f"top 1: class {top:>5}" in printed


@pytest.mark.parametrize("args, words", [
    (["--accelerator-config", "ethos-u65-256"], ["compiled for ethos-u55-128, not ethos-u65-256"]),
    (["--npu-runtime", "tir"], ["--npu-runtime applies to a package"]),
    (["--print-edges"], ["--print-edges applies to a package"]),
])
def test_tvmc_run_tflite_bad_input_is_one_line(same_flags, args, words):
    velas = str(same_flags["vela"] / "ds_cnn_kws_vela.tflite")
    rc, _, err = call(["run", velas, *args])
    one_line_error(rc, err, "run", *words)


def test_tvmc_run_refuses_a_tflite_without_ethos_u_operators(kws):
    rc, _, err = call(["run", kws])
    one_line_error(rc, err, "run", "has no ethos-u operator", "tvmc compile")


def test_tvmc_run_refuses_a_damaged_tflite(same_flags, tmp_path):
    cut = tmp_path / "cut.tflite"
    cut.write_bytes((same_flags["vela"] / "ds_cnn_kws_vela.tflite").read_bytes()[:3000])
    rc, _, err = call(["run", str(cut)])
    one_line_error(rc, err, "run", "is not a readable TFLite model")


@pytest.mark.parametrize("acc", ["ethos-u55-32", "ethos-u55-128", "ethos-u65-256", "ethos-u85-512"])
def test_the_default_system_is_velas_default_architecture_read_again(acc):
    """Vela's defaults read from Vela's default architecture (built once per process, and
    shared with its register generator) describe the same system as an architecture built
    for them, naming the defaults."""
    from ethosu.vela.architecture_features import ArchitectureFeatures

    from tvm_ethos.vela_options import read_system

    default = ArchitectureFeatures.DEFAULT_CONFIG
    assert read_system(acc) == read_system(acc, system_config=default, memory_mode=default)
