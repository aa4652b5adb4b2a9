"""The code's shape, checked as CI checks behaviour (docs/architecture.md, "Checked by tools"): the import graph
has no circle and keeps its layers (import-linter's contracts in pyproject.toml, and grimp's graph read here
independently), ``mypy --strict`` finds nothing in ``src/``, and ruff finds nothing to lint or reformat in
``src/`` and ``tests/``. Each runs the tool the way a developer would, so a failure prints what to fix."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.fail(
            f"{name} is not installed: pip install -e '.[test]' (the dev extra pins it)", pytrace=False
        )
    return found


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False, env={**os.environ}
    )


def test_mypy_strict_finds_nothing_in_src() -> None:
    done = _run(_tool("mypy"), "--no-error-summary")  # files and strictness: [tool.mypy] in pyproject.toml
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_lints_nothing_in_src_and_tests() -> None:
    done = _run(_tool("ruff"), "check", "src", "tests")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_would_reformat_nothing() -> None:
    done = _run(_tool("ruff"), "format", "--check", "src", "tests")
    assert done.returncode == 0, done.stdout + done.stderr


def test_import_linter_contracts_are_kept() -> None:
    done = _run(_tool("lint-imports"), "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_module_is_part_of_an_import_circle() -> None:
    """grimp's graph of src/agentmw (imports inside functions counted, ``TYPE_CHECKING`` ones not) has no
    strongly connected component larger than one module."""
    import grimp

    graph = grimp.build_graph("agentmw", exclude_type_checking_imports=True, cache_dir=None)
    circles = _circles({m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules})
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(sorted(c)) for c in circles)


def _circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of more than one module, without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _circles({"a": {"b"}, "b": set()}) == []
