"""A model compiled by Vela's command line, as a test or benchmark compares its stream with
an oracle: Vela writes ``<name>_vela.tflite`` into an output folder, so each call gets its own
temporary folder and returns the bytes, leaving nothing behind."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

VELA = Path(sys.executable).parent / "vela"
"""Vela 5.2's executable, installed next to this interpreter by the 'vela' extra."""


def vela_compile(model: bytes, accelerator: str = "ethos-u55-128", vela: Path | None = None,
                 options: Sequence[str] = ()) -> bytes:
    """``model`` compiled by ``vela`` (Vela 5.2 when None, another release's executable
    otherwise) for ``accelerator`` with further command-line ``options`` (none: Vela's
    default system, memory mode and optimisation)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "m.tflite"
        src.write_bytes(model)
        subprocess.run([str(vela or VELA), str(src), "--accelerator-config", accelerator,
                        *options, "--output-dir", tmp], check=True, capture_output=True)
        return (Path(tmp) / "m_vela.tflite").read_bytes()
