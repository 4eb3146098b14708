"""Compile a model and write everything tvm-ethos decides about it, for the determinism test.

    python -m tests.reliability.determinism_probe MODEL.tflite OUTDIR

Writes ``OUTDIR/model.tvmethos`` (``CompiledModel.save``), the partition reports (text and
JSON) for ``ethos-u,llvm`` and ``ethos-n,llvm``, and ``members.json``: a SHA-256 per zip
member, to name the member that differs when the artifact does.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile


def main(model: str, out: str) -> None:
    import tvm_ethos

    os.makedirs(out, exist_ok=True)
    mod = tvm_ethos.load_model(model)
    for target in ("ethos-u,llvm", "ethos-n,llvm"):
        report = tvm_ethos.partition_report(mod, target)
        tag = target.split(",")[0]
        with open(os.path.join(out, f"partition-{tag}.txt"), "w") as f:
            f.write(str(report))
        with open(os.path.join(out, f"partition-{tag}.json"), "w") as f:
            f.write(report.to_json())
    cm = tvm_ethos.compile(mod, target="ethos-u,llvm")
    path = cm.save(os.path.join(out, "model.tvmethos"))
    with zipfile.ZipFile(path) as z:
        members = {i.filename: hashlib.sha256(z.read(i.filename)).hexdigest()
                   for i in z.infolist()}
    with open(os.path.join(out, "members.json"), "w") as f:
        json.dump(members, f, sort_keys=True, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
