"""Builds the corpus of third-party command streams: every shipped model compiled by several
Vela releases, for several accelerators and both optimise modes.

The streams are what the functional model is checked against (``tests/ethosu_stream/
test_corpus.py``): code no one here wrote, from Vela versions whose stream layouts differ.
Each Vela release gets an isolated venv under the build directory (Vela 3.x needs
``numpy<2``, so the releases cannot share one), created once and reused while its pinned
requirements are unchanged. A case is compiled again only when its source model, Vela
release or options change, so a second run is a no-op and a fresh clone rebuilds from
nothing. A compile Vela refuses is recorded with Vela's message ("refused"), not treated
as a failure of this build.

Standard library only: it runs before any test dependency is importable.

    python tools/build_corpus.py --models ../shared/models --build build
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

#: Vela release -> the pip requirements of its venv (3.x predates numpy 2)
VELA_VERSIONS: dict[str, tuple[str, ...]] = {
    "3.11.0": ("ethos-u-vela==3.11.0", "numpy<2"),
    "4.5.0": ("ethos-u-vela==4.5.0",),
    "5.2.0": ("ethos-u-vela==5.2.0",),
}
#: shipped models, relative to the models folder: random weights, then trained ones
MODELS = (
    "ds_cnn_kws", "resnet8_cifar", "mobilenet_v1_0.25_96", "mobilenet_v1_1.0_224",
    "tflite-micro/person_detect", "tflite-micro/micro_speech_quantized",
    "tflite-micro/keyword_scrambled_8bit", "tflite-micro/trained_lstm_int8",
    "tflite-micro/hello_world_int8",
)
CONFIGS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
OPTIMISE = ("Size", "Performance")
MANIFEST = "manifest.json"
_RECORD = ".case.json"
_STAMP = ".corpus-stamp"


class Case(NamedTuple):
    """One compile: a Vela release, a shipped model, an accelerator and an optimise mode."""

    version: str
    model: str
    config: str
    optimise: str

    @property
    def name(self) -> str:
        """The model's file stem (``person_detect`` for ``tflite-micro/person_detect``)."""
        return self.model.rsplit("/", 1)[-1]

    @property
    def folder(self) -> Path:
        """Where the case's files go, relative to the corpus folder."""
        return Path(self.version) / self.config / self.optimise / self.name

    @property
    def id(self) -> str:
        return f"vela{self.version}-{self.name}-{self.config}-{self.optimise}"


def all_cases(versions=tuple(VELA_VERSIONS), models=MODELS) -> list[Case]:
    return [Case(v, m, c, o) for v in versions for m in models for c in CONFIGS
            for o in OPTIMISE]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ensure_venv(root: Path, version: str, cache: Path) -> Path:
    """The ``vela`` executable of release ``version``'s venv under ``root``, created (pip,
    its downloads cached in ``cache``) unless a venv with the same requirements is there."""
    venv = root / version
    vela = venv / "bin" / "vela"
    requirements = list(VELA_VERSIONS[version])
    stamp = venv / _STAMP
    if vela.exists() and stamp.exists() and json.loads(stamp.read_text()) == requirements:
        return vela
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", "--cache-dir", str(cache), *requirements],
                   check=True)
    stamp.write_text(json.dumps(requirements))
    return vela


def _freeze(venv: Path) -> list[str]:
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze",
                          "--disable-pip-version-check"], check=True, capture_output=True,
                         text=True).stdout
    return sorted(line for line in out.splitlines() if line.strip())


def _message(proc: subprocess.CompletedProcess, lines: int = 12) -> str:
    """The last lines Vela wrote (its error, or its warnings on success)."""
    text = (proc.stderr or "").strip() or (proc.stdout or "").strip()
    return "\n".join(text.splitlines()[-lines:])


def compile_case(case: Case, vela: Path, source: Path, corpus: Path) -> dict:
    """Compiles ``case`` into its folder unless the record there says it already was, from
    the same source bytes with the same Vela; returns the case's manifest entry."""
    folder = corpus / case.folder
    key = {"version": case.version, "model": case.model, "config": case.config,
           "optimise": case.optimise, "source_sha256": _sha256(source)}
    record = folder / _RECORD
    if record.exists():
        entry = json.loads(record.read_text())
        if {k: entry.get(k) for k in key} == key:
            return entry
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    proc = subprocess.run([str(vela), str(source), "--accelerator-config", case.config,
                           "--optimise", case.optimise, "--output-dir", str(folder)],
                          capture_output=True, text=True, cwd=folder)
    out = folder / f"{case.name}_vela.tflite"
    if proc.returncode == 0 and out.exists():
        entry = {**key, "status": "ok", "file": str(out.relative_to(corpus)),
                 "sha256": _sha256(out), "message": _message(proc, 3)}
    else:
        entry = {**key, "status": "refused", "file": None, "sha256": None,
                 "message": f"Vela exited {proc.returncode}: {_message(proc)}"}
    record.write_text(json.dumps(entry, indent=1, sort_keys=True))
    return entry


def build(models: Path, build_dir: Path, versions=tuple(VELA_VERSIONS), jobs: int = 2) -> dict:
    """Creates the venvs and compiles every case; writes and returns the manifest."""
    missing = [m for m in MODELS if not (models / f"{m}.tflite").exists()]
    if missing:
        raise SystemExit(f"build_corpus: {models} lacks {', '.join(missing)} (.tflite); pass "
                         "--models the shared models folder (or set TVM_ETHOS_MODELS)")
    unknown = [v for v in versions if v not in VELA_VERSIONS]
    if unknown:
        raise SystemExit(f"build_corpus: unknown Vela version(s) {unknown}; known: "
                         f"{', '.join(VELA_VERSIONS)}")
    corpus = build_dir / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    venvs = build_dir / "vela-venvs"
    cases = all_cases(versions)
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        # the venvs install side by side (mostly download and unpacking)
        velas = dict(zip(versions, pool.map(
            lambda v: ensure_venv(venvs, v, build_dir / "pip-cache"), versions)))
        entries = list(pool.map(
            lambda c: compile_case(c, velas[c.version], models / f"{c.model}.tflite", corpus),
            cases))
    manifest = {
        "versions": {v: {"requirements": list(VELA_VERSIONS[v]),
                         "installed": _freeze(venvs / v)} for v in versions},
        "configs": list(CONFIGS), "optimise": list(OPTIMISE), "models": list(MODELS),
        "cases": entries,
    }
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    path = corpus / MANIFEST
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return manifest


def main(argv=None) -> int:
    here = Path(__file__).resolve().parents[1]
    default_models = os.environ.get("TVM_ETHOS_MODELS", str(here.parent / "shared" / "models"))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=Path, default=Path(default_models),
                   help="the shipped models folder (default: $TVM_ETHOS_MODELS or "
                        "../shared/models)")
    p.add_argument("--build", type=Path, default=here / "build",
                   help="build folder: venvs in vela-venvs/, streams in corpus/")
    p.add_argument("--versions", nargs="+", default=list(VELA_VERSIONS),
                   help="Vela releases to compile with")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    args = p.parse_args(argv)
    start = time.monotonic()
    manifest = build(args.models.resolve(), args.build.resolve(), args.versions, args.jobs)
    cases = manifest["cases"]
    refused = [c for c in cases if c["status"] != "ok"]
    print(f"corpus: {len(cases) - len(refused)} streams, {len(refused)} refused by Vela, "
          f"in {time.monotonic() - start:.1f} s -> {args.build / 'corpus' / MANIFEST}")
    for c in refused:
        print(f"  Vela {c['version']} refused {c['model']} {c['config']} {c['optimise']}: "
              f"{c['message'].splitlines()[-1] if c['message'] else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
