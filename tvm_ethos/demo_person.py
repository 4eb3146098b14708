"""``make demo``, second part: person detection as a Cortex-M with an Ethos-U runs it.

  python -m tvm_ethos.demo_person person_detect.tflite IMAGE.bmp... [--out out/demo]
                                  [--accelerator ethos-u55-128]

1. ``tvmc compile person_detect.tflite --target ethos-u -o OUT/person_detect_ethos_u.tflite
   --output-format tflite``: the partition and the per-layer plan (cycles estimated);
2. each image (96x96 8-bit grey BMP, rows stored bottom-up) fed as tflite-micro's own test
   feeds it: its bytes in top-down row order reinterpreted as int8, no shift;
3. the written ``.tflite`` run as a board runs it (its ``ethos-u`` operators on the functional
   model of the Ethos-U, emulated; any other operator on TFLite's kernels), printing "person"
   or "no person" with the two scores and what the command stream did;
4. TFLite Micro's interpreter on the source model, on the same input: the scores must be
   identical.

Exit status 0 only when every image's scores equal TFLite Micro's; 1 otherwise; 2 on bad
input (as tvmc).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ethos_arch.accelerators import DEFAULT_ACCELERATOR
from ethosu_stream.run import operation_count
from ethosu_stream.tflite_graph import TfliteGraph
from tvm_ethos import cli
from tvm_ethos.backends.tflite_micro.reference import TflmReference

#: tflite-micro's person_detection model_settings.cc
LABELS = ("no person", "person")


def read_grey_bmp(path: str) -> np.ndarray:
    """An uncompressed 8-bit BMP's pixels, rows top-down, as a (height, width) uint8 array;
    a ValueError naming what is wrong for any other file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 54 or data[:2] != b"BM":
        raise ValueError(f"{path}: not a BMP file (no 'BM' header)")
    offset = int.from_bytes(data[10:14], "little")
    width = int.from_bytes(data[18:22], "little", signed=True)
    height = int.from_bytes(data[22:26], "little", signed=True)
    bits = int.from_bytes(data[28:30], "little")
    compression = int.from_bytes(data[30:34], "little")
    if bits != 8 or compression != 0 or width <= 0 or height == 0:
        raise ValueError(f"{path}: a {bits}-bit BMP (compression {compression}, {width}x"
                         f"{height}); an uncompressed 8-bit grey BMP is read")
    stride = (width + 3) // 4 * 4
    rows = abs(height)
    if offset + stride * rows > len(data):
        raise ValueError(f"{path}: the file ends inside its pixel rows")
    pixels = np.frombuffer(data, np.uint8, stride * rows, offset).reshape(rows, stride)
    pixels = pixels[:, :width]
    return np.ascontiguousarray(pixels[::-1] if height > 0 else pixels)


def image_input(path: str, shape) -> np.ndarray:
    """The model input of ``path``: the pixel bytes, top-down, reinterpreted as int8."""
    pixels = read_grey_bmp(path)
    if pixels.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {pixels.shape[1]}x{pixels.shape[0]} pixels; the model "
                         f"takes {list(shape)}")
    return pixels.view(np.int8).reshape(shape)


def label(scores: np.ndarray) -> str:
    return LABELS[int(np.argmax(scores.ravel()))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tvm_ethos.demo_person",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("model", metavar="person_detect.tflite")
    ap.add_argument("images", nargs="+", metavar="IMAGE.bmp")
    ap.add_argument("--out", default=os.path.join("out", "demo"), metavar="DIR")
    ap.add_argument("--accelerator", default=DEFAULT_ACCELERATOR.name,
                    help=f"the Ethos-U configuration (default {DEFAULT_ACCELERATOR.name})")
    args = ap.parse_args(argv)
    for path in [args.model] + args.images:
        if not os.path.isfile(path):
            print(f"demo_person: error: {path!r} does not exist", file=sys.stderr)
            return 2
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, "person_detect_ethos_u.tflite")
    argv_c = ["compile", args.model, "--target",
              f"ethos-u -accelerator_config={args.accelerator}", "-o", out,
              "--output-format", "tflite", "--no-progress"]
    print(f"\n== compile for the Ethos-U, the rest for TFLite Micro\n$ tvmc "
          f"{' '.join(repr(a) if ' ' in a else a for a in argv_c)}", flush=True)
    rc = cli.main(argv_c)
    if rc:
        return rc
    return 0 if _detect(args.model, out, args.images, args.accelerator) else 1


def _detect(model: str, compiled: str, images: list[str], accelerator: str) -> bool:
    with open(compiled, "rb") as f:
        data = f.read()
    with open(model, "rb") as f:
        source = f.read()
    graph = TfliteGraph(data, accelerator)
    import tflite

    g = tflite.Model.GetRootAsModel(source, 0).Subgraphs(0)
    shape = tuple(int(d) for d in g.Tensors(int(g.Inputs(0))).ShapeAsNumpy())
    print(f"\n== {os.path.basename(compiled)} ({len(data):,} bytes) on the functional Ethos-U "
          f"model ({accelerator}, emulated) against TFLite Micro's interpreter on "
          f"{os.path.basename(model)}")
    ok = True
    for path in images:
        x = image_input(path, shape)
        got, stats = graph.run([x])
        ref = TflmReference(source).run([x])
        same = np.array_equal(got[0].reshape(ref[0].shape), ref[0])
        ok &= same
        fast = stats.high_water.get(2, 0)
        print(f"{os.path.basename(path)}: {label(got[0])} (scores {got[0].ravel().tolist()}; "
              f"TFLite Micro {ref[0].ravel().tolist()}: {'identical' if same else 'DIFFERENT'})")
        print(f"  the stream ran {operation_count(stats.commands)} NPU operations, "
              f"{stats.macs:,} MACs, touched {stats.high_water.get(1, 0):,} bytes of the arena"
              + (f" and {fast:,} of the fast scratch" if fast else "")
              + f"; DMA {sum(stats.dma_bytes.values()):,} bytes")
    return ok


if __name__ == "__main__":
    sys.exit(main())
