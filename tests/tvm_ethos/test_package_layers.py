"""The compile path's packages import downward only, and none of them (nor the runtime) imports
a backend but through the registry and the contract: read from the code's own imports (ast),
every import, function-level ones included."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: lowest first: a package may import only those before it
LAYERS = ("runtime", "host.cpu", "compute", "emulator", "host.opencl", "pipeline")


def _package(module: str) -> str | None:
    rest = module.removeprefix("tvm_ethos.")
    if rest == module:
        return None
    for name in sorted(LAYERS, key=len, reverse=True):
        if rest == name or rest.startswith(name + "."):
            return name
    return None


def _imports(path: pathlib.Path) -> set[str]:
    """Every absolute module an import in ``path`` names (``from a import b``: ``a`` and
    ``a.b``, which may be a module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _files(layer: str) -> list[pathlib.Path]:
    files = sorted((ROOT / "tvm_ethos" / layer.replace(".", "/")).rglob("*.py"))
    assert files, f"no package tvm_ethos.{layer}"
    return files


@pytest.mark.parametrize("layer", LAYERS)
def test_a_package_imports_only_the_layers_below_it(layer):
    below = set(LAYERS[:LAYERS.index(layer)])
    up = sorted(f"{p.relative_to(ROOT)}: {m}" for p in _files(layer) for m in _imports(p)
                if _package(m) not in (None, layer) and _package(m) not in below)
    assert not up


@pytest.mark.parametrize("layer", LAYERS)
def test_the_runtime_and_the_compile_path_import_no_backend(layer):
    """Only the registry and the contract (``backends.base``): a backend is reached through
    them, never imported by name."""
    bad = sorted(f"{p.relative_to(ROOT)}: {m}" for p in _files(layer) for m in _imports(p)
                 if m.startswith("tvm_ethos.backends") and not m.startswith(
                     ("tvm_ethos.backends.registry", "tvm_ethos.backends.base")))
    assert not bad


def test_the_rule_sees_an_upward_import(tmp_path):
    """The check reads function-level imports too (a layer is not skipped by hiding one)."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from tvm_ethos.pipeline.driver import offload\n")
    assert {_package(m) for m in _imports(f)} == {"pipeline"}
