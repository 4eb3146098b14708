#!/usr/bin/env python3
"""Host (llvm) kernel latency of MobileNetV1-224's layer shapes, one operator per model.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/host_layers.py [--target T] [--mcpu CPU]
[NAME ...]``
(``NAME``: substrings of the layer names to run). Each layer is a one-operator int8 model
(``tests/tvm_ethos/tflite_builder``, random weights, seed 0) compiled for ``--target``
(``llvm``; ``ethos-u,llvm`` for the emulated NPU); the median milliseconds of ``run`` over
0.7 s are printed. Used to compare tiles and kernel paths (rfcs/0008): run it for two trees
back to back.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "tests" / "tvm_ethos"))

import tflite_builder as tb  # noqa: E402

LAYERS = [
    ("conv3x3 224x224x3->32 s2",
     lambda rs: tb.conv2d(rs, (1, 224, 224, 3), 32, (3, 3), (2, 2), act="relu6")),
    ("dw 112x112x32", lambda rs: tb.conv2d(rs, (1, 112, 112, 32), depthwise=True, act="relu6")),
    ("pw 112x112x32->64", lambda rs: tb.conv2d(rs, (1, 112, 112, 32), 64, (1, 1), act="relu6")),
    ("dw 112x112x64 s2",
     lambda rs: tb.conv2d(rs, (1, 112, 112, 64), stride=(2, 2), depthwise=True, act="relu6")),
    ("pw 56x56x128->128", lambda rs: tb.conv2d(rs, (1, 56, 56, 128), 128, (1, 1), act="relu6")),
    ("dw 56x56x128", lambda rs: tb.conv2d(rs, (1, 56, 56, 128), depthwise=True, act="relu6")),
    ("pw 14x14x512->512", lambda rs: tb.conv2d(rs, (1, 14, 14, 512), 512, (1, 1), act="relu6")),
    ("dw 14x14x512", lambda rs: tb.conv2d(rs, (1, 14, 14, 512), depthwise=True, act="relu6")),
    ("pw 7x7x1024->1024",
     lambda rs: tb.conv2d(rs, (1, 7, 7, 1024), 1024, (1, 1), act="relu6")),
    ("logits 1x1x1024->1001", lambda rs: tb.conv2d(rs, (1, 1, 1, 1024), 1001, (1, 1))),
    ("fc 1024->1001", lambda rs: tb.fully_connected(rs, k=1024, n=1001)),
]


def force_host_cpu(mcpu: str) -> None:
    """Build every host kernel of this process for the CPU ``mcpu`` (its kernels run here
    only where this machine has that CPU's instructions, e.g. znver3 on a Zen 4)."""
    from tvm_ethos.host.cpu import cpu_schedule

    cpu_schedule.host_target = lambda: {"kind": "llvm", "mcpu": mcpu}


def main(argv=None) -> int:
    import argparse

    import tvm_ethos
    from tests.helpers.tflite_oracle import random_inputs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--mcpu", help="build the host kernels for this CPU (e.g. znver3: AVX2, "
                    "no VNNI) instead of the compiling machine's")
    ap.add_argument("names", nargs="*", help="substrings of layer names (default: all)")
    args = ap.parse_args(argv)
    only = args.names
    if args.mcpu:
        force_host_cpu(args.mcpu)
    for name, make in LAYERS:
        if only and not any(o in name for o in only):
            continue
        model = make(np.random.RandomState(0))
        cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=args.target,
                               npu_runtime="tir")
        xs = random_inputs(model, np.random.RandomState(0))
        for _ in range(3):
            cm.run(*xs)
        lat = []
        t_end = time.perf_counter() + 0.7
        while time.perf_counter() < t_end:
            t0 = time.perf_counter()
            cm.run(*xs)
            lat.append(time.perf_counter() - t0)
        print(f"{name:26s} {statistics.median(lat) * 1e3:7.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
