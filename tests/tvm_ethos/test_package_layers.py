"""The compile path's packages import downward only, and none of them (nor the runtime) imports
a backend but through the registry and the contract: read from the code's own imports (ast),
every import, function-level ones included."""
from __future__ import annotations

import ast
import pathlib

import networkx as nx
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


# ------------------------------------------------------------------ the whole project's graph
#: the project's packages; the graph is every import between their modules
PROJECT = ("ethos_arch", "planner", "ethosu_stream", "tvm_ethos")
#: packages that must import nothing of these (the TVM-free layers stay TVM-free)
FORBIDDEN = {"ethos_arch": PROJECT[1:] + ("tvm", "tvm_ffi"),
             "planner": ("tvm_ethos", "tvm", "tvm_ffi"),
             "ethosu_stream": ("tvm_ethos", "tvm", "tvm_ffi")}

_HELP = "keeps tvmc --help fast: the module loads on every tvmc start, this import on use"
_TVM = "loads TVM, which only building or running a model needs"
_PACKAGE = ("a .tflite compile writes no package and runs nothing: the package format and the "
            "executor load where a package is written, read or run (test_startup guards it)")
_LSTM = ("an LSTM planned with its neighbours goes through TVM's importer; a .tflite compile "
         "without one loads no TVM (tvm_ethos.tflite_direct)")
#: (importer, imported) -> why the import sits inside a function: the public edge (the CLI,
#: ``import tvm_ethos``, a plugin loaded at every tvmc start) and optional extras. Everything
#: else imports at the top of its file, so the graph the tools read is the real one.
LAZY = {
    ("tvm_ethos", "tvm_ethos.frontend"): "the public API loads TVM on first use (__getattr__)",
    ("tvm_ethos", "tvm_ethos.compiler"): "the public API loads TVM on first use (__getattr__)",
    ("tvm_ethos", "tvm_ethos.partition"): "the public API loads TVM on first use (__getattr__)",
    ("tvm_ethos", "tvm_ethos.byoc"): "the public API loads on first use; codegens register last",
    ("tvm_ethos", "tvm_ethos.backends.tflite_micro.compile"):
        "the public API loads TVM on first use (__getattr__)",
    ("tvm_ethos", "tvm_ethos.targets"): "the public API loads on first use (__getattr__)",
    ("tvm_ethos.byoc", "tvm_ethos.compiler"): _TVM,
    ("tvm_ethos.byoc", "tvm_ethos.frontend"): _TVM,
    ("tvm_ethos.byoc", "tvm_ethos.frontend.relax_module"): _TVM,
    ("tvm_ethos.byoc", "tvm_ethos.partition"): _TVM,
    ("tvm_ethos.byoc", "tvm_ethos.pipeline.planning"): _TVM,
    ("tvm_ethos.byoc", "tvm_ethos.pipeline.driver"): _TVM,
    ("tvm_ethos.byoc", "tvm_ethos.targets"): "byoc loads with import tvm_ethos; " + _HELP,
    ("tvm_ethos.compiler", "tvm_ethos.pipeline.report"): _TVM,
    ("tvm_ethos.compiler", "tvm_ethos.partition"): _TVM,
    ("tvm_ethos.compiler", "tvm_ethos.pipeline.driver"): _TVM,
    ("tvm_ethos.compiler", "tvm_ethos.host.cpu.cpu_schedule"): _TVM,
    ("tvm_ethos.compiler", "tvm_ethos.host.cpu.host_cpu"): _TVM,
    ("tvm_ethos.compiler", "tvm_ethos.package"): _PACKAGE,
    ("tvm_ethos.compiler", "tvm_ethos.runtime.program"): _PACKAGE,
    ("tvm_ethos.compiler", "tvm_ethos.runtime.executor"): _PACKAGE,
    ("tvm_ethos.cli", "planner.option_flags"): _HELP,
    ("tvm_ethos.cli", "planner.api"): _HELP,
    ("tvm_ethos.cli", "planner.options"): _HELP,
    ("tvm_ethos.cli", "planner.report"): _HELP,
    ("tvm_ethos.cli", "planner.sweep"): _HELP,
    ("tvm_ethos.cli_compile", "planner.option_flags"): _HELP,
    ("tvm_ethos.cli_compile", "tvm_ethos.pipeline.planning"): _HELP,
    ("tvm_ethos.cli_compile", "tvm_ethos.stages"): _HELP,
    ("tvm_ethos.backends.ethos_u", "tvm_ethos.backends.ethos_u.stream_cascade"): _HELP,
    ("tvm_ethos.backends.ethos_u", "tvm_ethos.backends.ethos_u.stream_gen"): _HELP,
    ("tvm_ethos.backends.ethos_u", "tvm_ethos.backends.ethos_u.stream_run"): _HELP,
    ("tvm_ethos.backends.ethos_u", "tvm_ethos.backends.ethos_u.stream_ops"): _HELP,
    ("tvm_ethos.backends.ethos_u", "ethosu_stream"): _HELP,
    ("tvm_ethos.backends.ethos_u.stream_run", "ethosu_stream"): _HELP,
    ("tvm_ethos.backends.ethos_u.stream_run", "ethosu_stream.accelerator"): _HELP,
    ("tvm_ethos.backends.ethos_u.stream_run", "ethosu_stream.memory"): _HELP,
    ("tvm_ethos.backends.ethos_u.stream_run", "ethosu_stream.tflite_custom_op"): _HELP,
    ("tvm_ethos.backends.host_common", "tvm_ethos.compute.te_ops"): _HELP + " (and " + _TVM + ")",
    ("tvm_ethos.backends.llvm", "tvm_ethos.host.cpu.host_cpu"): _HELP + " (and " + _TVM + ")",
    ("tvm_ethos.backends.opencl", "tvm_ethos.host.opencl.gpu_schedule"):
        _HELP + " (and " + _TVM + ")",
    ("tvm_ethos.backends.npu_common", "tvm_ethos.pipeline.codegen"):
        "the emulator codegen loads TVM when RunCodegen first calls it",
    ("tvm_ethos.backends.tflite_micro", "tvm_ethos.backends.tflite_micro.compile"): _HELP,
    ("tvm_ethos.backends.tflite_micro.lstm_cascade", "tvm_ethos.emulator.part_matchers"): _LSTM,
    ("tvm_ethos.backends.tflite_micro.lstm_cascade", "tvm_ethos.frontend"): _LSTM,
    ("tvm_ethos.backends.tflite_micro.lstm_cascade", "tvm_ethos.partition"): _LSTM,
    ("tvm_ethos.backends.tflite_micro.lstm_cascade", "tvm_ethos.pipeline.npu_subgraphs"): _LSTM,
    ("tvm_ethos.frontend.tflite_import", "tvm_ethos.tflite_converter"):
        "the converter subclasses TVM's TFLite importer, an optional extra (tflite)",
    ("tvm_ethos.frontend.tflite_support", "tvm_ethos.tflite_converter"):
        "the converter subclasses TVM's TFLite importer, an optional extra (tflite)",
    ("planner.__main__", "planner.api"): "python -m planner --help stays fast",
    ("planner.__main__", "planner.report"): "python -m planner --help stays fast",
}


def _module_files() -> dict[str, pathlib.Path]:
    out = {}
    for pkg in PROJECT:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = p.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _targets(node, module: str, is_package: bool, known) -> list[str]:
    """The modules an import statement names, resolved (relative imports too): ``from a import
    b`` is ``a.b`` where that is a module, else ``a``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[:len(parts) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
    return list(dict.fromkeys(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                              for a in node.names))


def _edges(module: str, path: pathlib.Path, known) -> list[tuple[str, bool, int]]:
    """(imported module, inside a function or class, line) for every import of ``path``; an
    ``if TYPE_CHECKING:`` import is left out (it never runs)."""
    out = []

    def walk(node, nested):
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.extend((t, nested, child.lineno)
                           for t in _targets(child, module, path.name == "__init__.py", known))
            else:
                walk(child, nested or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)))

    walk(ast.parse(path.read_text()), False)
    return out


def _graph(files: dict[str, pathlib.Path]):
    """Every import of the project: {(importer, imported): [(nested, line)]}."""
    edges: dict[tuple[str, str], list[tuple[bool, int]]] = {}
    for module, path in files.items():
        for target, nested, line in _edges(module, path, files):
            edges.setdefault((module, target), []).append((nested, line))
    return edges


@pytest.fixture(scope="module")
def project():
    files = _module_files()
    return files, _graph(files)


def _cycles(edges, files) -> list[list[str]]:
    """Each import cycle, as one closed path through a strongly connected component."""
    g = nx.DiGraph((a, b) for a, b in edges if b in files and a != b)
    out = []
    for component in nx.strongly_connected_components(g):
        if len(component) > 1:
            path = [a for a, _b in nx.find_cycle(g.subgraph(component))]
            out.append(path + path[:1])
    return sorted(out)


def test_the_project_import_graph_has_no_cycle(project):
    files, edges = project
    cycles = _cycles(edges, files)
    assert not cycles, ("import cycles (move the shared piece to the lower module, or pass it "
                        "in): " + "; ".join(" -> ".join(c) for c in cycles))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_the_tvm_free_packages_import_nothing_above_them(project, package):
    files, edges = project
    bad = sorted(f"{files[a].relative_to(ROOT)}:{line}: {b}" for (a, b), uses in edges.items()
                 for _nested, line in uses
                 if (a == package or a.startswith(package + "."))
                 and b.split(".")[0] in FORBIDDEN[package])
    assert not bad, f"{package} must not import {', '.join(FORBIDDEN[package])}: {bad}"


def test_function_level_project_imports_are_the_listed_exceptions(project):
    files, edges = project
    hidden = sorted({(a, b) for (a, b), uses in edges.items()
                     if b.split(".")[0] in PROJECT and a != b
                     and any(nested for nested, _line in uses)})
    new = [f"{files[a].relative_to(ROOT)}:{min(ln for n, ln in edges[a, b] if n)}: imports {b} "
           "inside a function" for a, b in hidden if (a, b) not in LAZY]
    assert not new, ("move these imports to the top of the file (break a cycle they hide by "
                     "moving the shared piece down), or add (importer, imported) to LAZY with "
                     "the reason they load late: " + "; ".join(new))
    stale = sorted(set(LAZY) - set(hidden))
    assert not stale, f"LAZY lists imports that are no longer inside a function: {stale}"


def test_the_graph_reads_hidden_relative_and_type_checking_imports(tmp_path):
    """The reader sees an import inside a function, resolves a relative one, and leaves out
    ``if TYPE_CHECKING:`` imports, which never run."""
    pkg = tmp_path / "tvm_ethos" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nfrom . import b\n"
                              "if TYPE_CHECKING:\n    from tvm_ethos.sub import c\n"
                              "def f():\n    from tvm_ethos.pipeline import driver\n")
    known = {"tvm_ethos.sub", "tvm_ethos.sub.a", "tvm_ethos.sub.b", "tvm_ethos.sub.c",
             "tvm_ethos.pipeline", "tvm_ethos.pipeline.driver"}
    got = {(t, nested) for t, nested, _ in _edges("tvm_ethos.sub.a", pkg / "a.py", known)}
    assert got == {("typing", False), ("tvm_ethos.sub.b", False),
                   ("tvm_ethos.pipeline.driver", True)}
    edges = {("x", "y"): [(False, 1)], ("y", "x"): [(True, 2)]}
    assert _cycles(edges, {"x", "y"}) in ([["x", "y", "x"]], [["y", "x", "y"]])
