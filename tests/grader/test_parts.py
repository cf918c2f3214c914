"""The grader's parts, by the process that runs them, import one way only: read from the source
(``ast``), every import statement, including those inside functions.

  * every module of ``grader`` is in one part (ARCHITECTURE.md, "The grader, by the process that runs it"):
    ``kernel`` (the learner's kernel: ``checks/``, ``mutants/``, ``kernel/``), ``fork_server``
    (inside a worker's sandbox), ``worker`` (a grading worker), ``instructor`` (the CLI's process),
    or ``shared`` (the package itself, ``files``, ``course``, the course's nbgrader config);
  * the learner's kernel never imports the worker's, the fork server's or the instructor's modules;
    the fork server imports only the kernel's; the worker never imports the instructor's (nor the
    fork server's: it starts it by its module's name); the shared modules import only each other;
  * no two modules of the grader import each other, directly or through others.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grader

PACKAGE = Path(grader.__file__).parent
SHARED = {"grader", "grader.files", "grader.course", "grader.nbgrader_config"}
# part -> the parts it may import from (its own included)
MAY_IMPORT = {
    "shared": {"shared"},
    "kernel": {"kernel", "shared"},
    "fork_server": {"fork_server", "kernel", "shared"},
    "worker": {"worker", "kernel", "shared"},
    "instructor": {"instructor", "worker", "kernel", "shared"},
}


def part(module: str) -> str | None:
    """The part a module of the grader belongs to (None: not one of the grader's modules)."""
    if module in SHARED:
        return "shared"
    top = module.split(".")[1] if module.startswith("grader.") else None
    if top in ("checks", "mutants", "kernel"):
        return "kernel"
    if top in ("fork_server", "worker", "instructor"):
        return top
    if top in ("cli", "__main__"):
        return "instructor"
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _run_time_nodes(tree: ast.AST):
    """Every node, but those under ``if TYPE_CHECKING:`` (read by type checkers only, never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for branch in node.orelse:
                yield branch
                yield from _run_time_nodes(branch)
            continue
        yield node
        yield from _run_time_nodes(node)


def imports(name: str, source: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module) for every import of a grader module run by the source of module ``name`` (a
    name imported from a package that is itself a module counts as that module)."""
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in _run_time_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "grader"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            if source_module.split(".")[0] != "grader":
                continue
            for alias in node.names:
                sub = f"{source_module}.{alias.name}"
                found.append((node.lineno, sub if _is_module(sub) else source_module))
    return found


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "jupyter" not in p.relative_to(PACKAGE).parts)


def violations(here: str, source: str, is_package: bool = False) -> list[str]:
    mine = part(here)
    return [f"line {line}: {module} ({part(module)}) from {here} ({mine})"
            for line, module in imports(here, source, is_package)
            if part(module) is not None and part(module) not in MAY_IMPORT[mine]]


def test_every_module_of_the_grader_is_in_a_part():
    loose = [_module_name(p) for p in SOURCES if part(_module_name(p)) is None]
    assert not loose, f"put {loose} in a part (instructor/, worker/, fork_server/, kernel/) or in SHARED"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: _module_name(p))
def test_imports_go_one_way_between_the_parts(path):
    wrong = violations(_module_name(path), path.read_text(), path.name == "__init__.py")
    assert not wrong, "\n".join(wrong)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (module -> the modules it imports), each as a path back to its start."""
    found, state = [], {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for nxt in sorted(graph.get(module, ())):
            if state.get(nxt) == "open":
                found.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[module] = "done"
    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_no_module_of_the_grader_imports_itself_through_others():
    graph = {}
    for path in SOURCES:
        name = _module_name(path)
        graph[name] = {m for _, m in imports(name, path.read_text(), path.name == "__init__.py")
                       if m != name and not name.startswith(m + ".")}    # a module's own package runs first anyway
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" → ".join(c) for c in found)


def test_a_cycle_is_found_directly_or_through_others():
    """The cycle this layout removed (execute imported kernel_cache's copy, which imported execute's executor)."""
    assert cycles({"execute": {"kernel_cache"}, "kernel_cache": {"execute"}}) == [["execute", "kernel_cache", "execute"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.parametrize("here, source, why", [
    ("grader.checks.exercise", "from ..worker.sandbox import Sandbox", "grader.worker.sandbox (worker)"),
    ("grader.kernel.progress", "def f():\n    from grader.instructor import home", "grader.instructor.home (instructor)"),
    ("grader.worker.execute", "from ..instructor.preflight import check_solution", "grader.instructor.preflight (instructor)"),
    ("grader.worker.execute", "from ..fork_server import server", "grader.fork_server.server (fork_server)"),
    ("grader.fork_server.server", "from ..worker.sandbox import Sandbox", "grader.worker.sandbox (worker)"),
    ("grader.files", "from .kernel import progress", "grader.kernel.progress (kernel)"),
    ("grader.kernel.progress", "if True:\n    from ..worker import job", "grader.worker.job (worker)"),
])
def test_the_rule_refuses_an_import_the_wrong_way(here, source, why):
    """The rule can fail: each line is refused, naming what it imports."""
    wrong = violations(here, source)
    assert len(wrong) == 1 and why in wrong[0], wrong


def test_the_rule_allows_what_goes_the_right_way():
    assert violations("grader.kernel.progress", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from ..worker.job import GradingJob") == []
    assert violations("grader.instructor.autograde", "from ..worker.execute import execute_submission\n"
                      "from ..kernel import progress\nfrom ..course import Course") == []
    assert violations("grader.worker.execute", "from . import chains\nfrom ..files import empty\n"
                      "from ..checks.report import CheckReport") == []
