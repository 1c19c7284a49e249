"""Imports run one way: down docs/layout.md's layers, and no module needs a function-level import to dodge a cycle.

The graph counts every import of a package module, at any depth (a lazy import inside a function is an
edge like any other), so a cycle hidden behind a lazy import still shows. A package's face
(knomit_judge/__init__.py re-exports the library API, passes/__init__.py the shared types) counts only
where a module imports names from it, not for every module beneath it.

The tests' imports run one way too: a test file takes its helpers from tests/helpers.py, judges.py or
processes.py (or a fixture), never from conftest.py or from another test file.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "knomit_judge"
LAYOUT = PACKAGE.parent / "docs" / "layout.md"
TOP = "knomit_judge"
TESTS = PACKAGE.parent / "tests"
ROW = re.compile(r"^\| (\d+)\. [^|]+\| ([^|]+) \|")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that `name` imports anywhere in its body (resolved relative imports)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from . import precision` imports the module precision; `from .x import name` imports x
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a name below a module
                target = target.rpartition(".")[0]
            if target and target.startswith(TOP):
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    edges = {}
    for name, path in mods.items():
        deps = imported(name, path, known)
        deps.discard(name)
        deps.discard(TOP)
        edges[name] = deps
    return edges


def table(text: str) -> list[tuple[int, str]]:
    """The layer table's (layer, module) rows as written: `passes/base` is knomit_judge.passes.base."""
    return [(int(m[1]), f"{TOP}.{name.replace('/', '.')}") for line in text.splitlines() if (m := ROW.match(line))
            for name in re.findall(r"`([^`]+)`", m[2])]


def upward(edges: dict[str, set[str]], layer: dict[str, int]) -> list[str]:
    """Every import of a module in a higher layer than the importer's."""
    return sorted(f"{a} (layer {layer[a]}) imports {b} (layer {layer[b]})"
                  for a, deps in edges.items() for b in deps if layer[b] > layer[a])


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_import_graph_has_no_cycle_even_through_function_level_imports():
    edges = graph()
    assert len(edges) > 30  # the whole package was read, not an empty folder
    assert "knomit_judge.config" in edges["knomit_judge.daemon"]  # the reader sees real edges
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_layer_table_names_every_module_once():
    rows = table(LAYOUT.read_text(encoding="utf-8"))
    named = [name for _, name in rows]
    assert len(named) > 30  # the table was read, not an empty match
    assert sorted(n for n in set(named) if named.count(n) > 1) == []
    assert sorted(set(modules()) - {TOP} - set(named)) == []  # the package's face is not a layer
    assert sorted(set(named) - set(modules())) == []


def test_no_module_imports_from_a_higher_layer():
    layer = {name: n for n, name in table(LAYOUT.read_text(encoding="utf-8"))}
    edges = {a: deps for a, deps in graph().items() if a in layer}  # the package's face imports the API it offers
    assert upward(edges, layer) == []


def test_the_layer_check_finds_an_import_up_a_layer():
    """The check can fail: a table with a lower module that imports a higher one is reported."""
    rows = table("| layer | modules | what |\n|---|---|---|\n| 1. ground | `corpus`, `config` | x |\n"
                 "| 2. passes | `passes/base` | y |\n")
    assert rows == [(1, "knomit_judge.corpus"), (1, "knomit_judge.config"), (2, "knomit_judge.passes.base")]
    layer = {name: n for n, name in rows}
    edges = {"knomit_judge.corpus": {"knomit_judge.passes.base", "knomit_judge.config"},
             "knomit_judge.config": set(), "knomit_judge.passes.base": {"knomit_judge.corpus"}}
    assert upward(edges, layer) == ["knomit_judge.corpus (layer 1) imports knomit_judge.passes.base (layer 2)"]


def test_no_module_is_over_600_lines_and_the_spine_is_at_most_400():
    """Split before a module passes ~600 lines (STYLE.md); the spine reads as the session's steps."""
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    assert sizes["knomit_judge.session.review"] <= 400
    assert {name: n for name, n in sizes.items() if n > 600} == {}


def test_the_cycle_finder_finds_a_cycle_behind_a_lazy_import(tmp_path):
    """The check can fail: a function-level import back up the layers is a cycle to it."""
    low = tmp_path / "low.py"
    low.write_text("def f():\n    from .high import g\n    return g\n")
    high = tmp_path / "high.py"
    high.write_text("from .low import f\n")
    known = {"knomit_judge.low", "knomit_judge.high"}
    edges = {"knomit_judge.low": imported("knomit_judge.low", low, known),
             "knomit_judge.high": imported("knomit_judge.high", high, known)}
    assert find_cycle(edges) == ["knomit_judge.high", "knomit_judge.low", "knomit_judge.high"]


def helper_imports(path: Path) -> list[str]:
    """Where a file imports conftest or a test file, at any depth: 'test_x.py:2 imports conftest'."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        out += [f"{path.name}:{node.lineno} imports {name}" for name in names
                if name.split(".")[0] == "conftest" or name.split(".")[0].startswith("test_")]
    return sorted(out, key=lambda line: int(line.split(":")[1].split()[0]))


def test_no_test_imports_conftest_or_another_test_file():
    """conftest.py is pytest's (the fixtures and the run's setup) and a test file holds tests: a name imported
    from either resolves only through pytest's path insertion, and runs its module's setup as a side effect.
    Helpers live in modules of their own (helpers.py, judges.py, processes.py); the benchmarks use them too."""
    files = sorted(TESTS.glob("*.py")) + sorted((PACKAGE.parent / "benchmarks").glob("*.py"))
    assert len([f for f in files if f.name.startswith("test_")]) > 60  # the tests were read, not an empty glob
    assert [line for f in files for line in helper_imports(f)] == []


def test_the_helper_import_check_finds_an_import_of_conftest_or_a_test_file(tmp_path):
    """The check can fail: an import of conftest at the top or in a function, and one of a test file, are found;
    the helper modules' are not."""
    test = tmp_path / "test_x.py"
    test.write_text("import json\nfrom conftest import git\nfrom helpers import make_repo\n\n\ndef test_a():\n"
                    "    import conftest\n    from test_sync import clone\n    from judges import planted\n")
    assert helper_imports(test) == ["test_x.py:2 imports conftest", "test_x.py:7 imports conftest",
                                    "test_x.py:8 imports test_sync"]


@pytest.mark.slow  # a fresh interpreter per module: the longest test of the fast tier otherwise
def test_every_module_imports_first_in_a_fresh_interpreter():
    """Whichever module a program imports first, it loads: no partly initialised module is ever used."""
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}

    def load(name: str):
        run = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, env=env,
                             timeout=120)
        return name, run.returncode, run.stderr.strip().splitlines()[-1:]

    with ThreadPoolExecutor(4) as pool:
        failed = [(n, err) for n, rc, err in pool.map(load, sorted(modules())) if rc]
    assert not failed
