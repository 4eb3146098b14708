"""Streams from older Vela releases, whose lowering leans on register behaviour Vela 5.2's
does not (an int32 OFM written with a non-zero OFM_ZERO_POINT in the softmax): bit-exact
with TFLite Micro's interpreter. The tflite-micro repository's own ``person_detect_vela``
(Vela 3.11.0) always runs; fresh compilations run where an older Vela's venv is there
(``TVM_ETHOS_VELA_VENVS``, else ``build/vela-venvs`` from ``make corpus``)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ethosu_stream.feature_map import from_registers
from ethosu_stream.ops_common import ofm_shape
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.models import REPO

# TFLite Micro's outputs for person_detect.tflite on its test images (models/README.md)
PERSON_DETECT = {"person": [-113, 113], "no_person": [57, -57]}
REDUCE_SUM, CLZ = 2, 7


def _tflm(data: bytes, x: np.ndarray) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(bytes(data))
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0)


def _bmp_as_int8(path: Path) -> np.ndarray:
    """An 8-bit grey BMP's pixels in top-down row order, the bytes read as int8 (the
    convention tflite-micro's person detection test feeds its model)."""
    raw = path.read_bytes()
    offset = int.from_bytes(raw[10:14], "little")
    width = int.from_bytes(raw[18:22], "little")
    height = int.from_bytes(raw[22:26], "little", signed=True)
    row_bytes = (width + 3) // 4 * 4
    rows = [np.frombuffer(raw, np.uint8, width, offset + r * row_bytes)
            for r in range(abs(height))]
    pixels = np.stack(rows[::-1] if height > 0 else rows)  # positive height: bottom-up
    return pixels.view(np.int8).reshape(1, abs(height), width, 1)


@pytest.mark.parametrize("image", sorted(PERSON_DETECT))
def test_tflite_micros_person_detect_vela_classifies_as_tflite_micro(models_dir, image):
    micro = models_dir / "tflite-micro"
    if not (micro / "person_detect_vela.tflite").exists():
        pytest.skip(f"{micro} has no person_detect_vela.tflite (set TVM_ETHOS_MODELS)")
    x = _bmp_as_int8(micro / f"{image}.bmp")
    want = _tflm((micro / "person_detect.tflite").read_bytes(), x)
    assert want.ravel().tolist() == PERSON_DETECT[image]
    # compiled by Vela 3.11.0 for ethos-u55-256 (tflite-micro's conversion script)
    got, _ = run_vela_model((micro / "person_detect_vela.tflite").read_bytes(), [x],
                            "ethos-u55-256")
    assert got[0].ravel().tolist() == want.ravel().tolist()


def _old_vela(version: str) -> Path | None:
    env = os.environ.get("TVM_ETHOS_VELA_VENVS")
    roots = ([Path(env)] if env else []) + [REPO / "build" / "vela-venvs"]
    for root in roots:
        for name in (version, f"v{version}"):
            exe = root / name / "bin" / "vela"
            if exe.exists():
                return exe
    return None


@pytest.fixture(scope="module")
def old_vela_out(tmp_path_factory, models_dir):
    """(version, model, config, optimise) -> the ``_vela.tflite`` bytes that Vela release
    compiled; skips where that release's venv is not there."""
    root = tmp_path_factory.mktemp("old-vela")
    cache: dict = {}

    def compile_(version: str, model: str, config: str, optimise: str) -> bytes:
        vela = _old_vela(version)
        if vela is None:
            pytest.skip(f"no Vela {version} venv (set TVM_ETHOS_VELA_VENVS or run `make corpus`)")
        key = version, model, config, optimise
        if key not in cache:
            src = _source(models_dir, model)
            out = root / version / config / optimise
            subprocess.run([str(vela), str(src), "--accelerator-config", config, "--optimise",
                            optimise, "--output-dir", str(out)], check=True, capture_output=True)
            cache[key] = (out / f"{model}_vela.tflite").read_bytes()
        return cache[key]

    return compile_


def _source(models_dir: Path, model: str) -> Path:
    for p in (models_dir / f"{model}.tflite", models_dir / "tflite-micro" / f"{model}.tflite"):
        if p.exists():
            return p
    pytest.skip(f"model {model} not in {models_dir}")


OLD_CASES = [
    ("4.5.0", "resnet8_cifar", "ethos-u55-128", "Performance"),
    ("3.11.0", "resnet8_cifar", "ethos-u65-256", "Size"),
    ("4.5.0", "micro_speech_quantized", "ethos-u55-256", "Size"),
    ("3.11.0", "micro_speech_quantized", "ethos-u65-256", "Performance"),
]


@pytest.mark.parametrize("version,model,config,optimise", OLD_CASES,
                         ids=["-".join(c) for c in OLD_CASES])
def test_an_older_velas_stream_is_bit_exact_with_tflite_micro(
        old_vela_out, models_dir, version, model, config, optimise):
    data = old_vela_out(version, model, config, optimise)
    src = _source(models_dir, model).read_bytes()
    shape = read_ethos_u_ops(data)[0].inputs[0].shape
    outs = []
    for seed in (1, 2):
        x = np.random.RandomState(seed).randint(-128, 128, shape).astype(np.int8)
        got, _ = run_vela_model(data, [x], config)
        want = _tflm(src, x)
        assert np.array_equal(got[0].reshape(want.shape), want), \
            f"{np.count_nonzero(got[0].ravel() != want.ravel())} of {want.size} differ"
        outs.append(want)
    assert not np.array_equal(*outs)  # the outputs follow the input (no saturated softmax)


def _softmax_sums(data: bytes, x: np.ndarray, config: str) -> list[np.ndarray]:
    """What the softmax's REDUCE_SUM and CLZ read (the rescaled exponentials, their sum):
    int32 intermediates every Vela release computes the same way."""
    seen = []

    def keep(cmd, state, mem):
        if cmd.name == "NPU_OP_POOL" and cmd.param == REDUCE_SUM:
            h, w, _ = ofm_shape(state)
            depth = state.param("IFM_DEPTH_M1") + 1
        elif cmd.name == "NPU_OP_ELEMENTWISE" and cmd.param == CLZ:
            h, w, depth = ofm_shape(state)
        else:
            return
        ifm = from_registers(state, "IFM")
        seen.append(mem.read(ifm.region, ifm.grid(h, w, depth), ifm.dtype).ravel().copy())

    read_ethos_u_ops(data)[0].run([x], config, keep)
    return seen


def test_an_older_velas_softmax_steps_match_vela_5_2s(old_vela_out, vela_out):
    """Vela 4.5 writes the softmax's int32 steps with the input's zero point as their OFM
    zero point, Vela 5.2 with 0: both streams must reach the same exponentials and sum."""
    old = old_vela_out("4.5.0", "resnet8_cifar", "ethos-u55-128", "Performance")
    new, _ = vela_out("resnet8_cifar", "ethos-u55-128")
    x = np.random.RandomState(3).randint(-128, 128, read_ethos_u_ops(new)[0].inputs[0].shape
                                         ).astype(np.int8)
    a, b = _softmax_sums(old, x, "ethos-u55-128"), _softmax_sums(new, x, "ethos-u55-128")
    assert len(a) == len(b) == 2 and a[0].size == 10 and a[1].size == 1
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert a[1][0] == a[0].sum()
