"""The TVM-free packages (``ethos_arch``, ``planner``, ``ethosu_stream``) import neither TVM nor
``tvm_ethos``, ``ethos_arch`` imports nothing of the project, and their modules' imports (at the
top or inside functions alike) form no cycle. Read from the source, so a lazy import cannot
hide an edge."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ethos_arch", "planner", "ethosu_stream")
PROJECT = PACKAGES + ("tvm_ethos", "tvm")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports: ``from a import b`` is ``a.b`` when that is a
    module, else ``a``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m.split(".")[0] in PROJECT}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def test_the_tvm_free_packages_import_neither_tvm_nor_tvm_ethos():
    bad = {m: sorted(d for d in deps if d.split(".")[0] in ("tvm", "tvm_ethos"))
           for m, deps in _graph().items()}
    assert {m: d for m, d in bad.items() if d} == {}


def test_ethos_arch_imports_nothing_of_the_project():
    graph = _graph()
    arch = {m: deps for m, deps in graph.items() if m.split(".")[0] == "ethos_arch"}
    assert arch, "no ethos_arch modules found"
    assert {m: sorted(d for d in deps if d.split(".")[0] != "ethos_arch")
            for m, deps in arch.items()} == {m: [] for m in arch}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if d == m:
                continue
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_tvm_free_packages_have_no_import_cycle():
    assert _cycle(_graph()) is None


@pytest.mark.parametrize("graph, cycle", [
    ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
    ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
])
def test_the_cycle_finder_finds_cycles(graph, cycle):
    assert _cycle(graph) == cycle
