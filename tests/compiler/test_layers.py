"""The compiler's imports only go down: read from the source (``ast``), every import statement,
including those inside functions.

  * each module of ``tensorcraft.compiler`` sits in a layer (below); it imports only from layers below
    its own (the data every stage shares at the bottom, the pipeline and the runtime at the top);
  * ``passes/`` and ``codegen/`` never import each other (what fusion makes for codegen, and the
    memory plan for the wrapper, live in ``plans`` beside ``ir``);
  * no module of the compiler imports the package's face (``import tensorcraft``, or a name that
    ``tensorcraft/__init__.py`` or ``tensorcraft/compiler/__init__.py`` defines): outside the compiler
    it may read only the foundation modules ``tensorcraft.trees`` and ``tensorcraft.stages``.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tensorcraft

PACKAGE = Path(tensorcraft.__file__).parent
COMPILER = "tensorcraft.compiler"

# Lower numbers first. A package (passes, codegen, guards) is one unit: its modules may import each other.
LAYERS = {
    "ir": 0,
    "plans": 1, "functional": 1, "opnames": 1,
    "builder": 2, "draw": 2,
    "capture": 3, "passes": 3, "codegen": 3, "guards": 3,
    "interpret": 4,
    "training": 5,
    "pipeline": 6,
    "dynamo_backend": 7,
    "runtime": 8,
    "api": 9,
    "examples": 10,   # demonstration models, for notebooks and benchmarks: reads the other packages
}
FOUNDATION = {"tensorcraft.trees", "tensorcraft.stages"}
OTHER_PACKAGES_FOR = {"examples": ("tensorcraft.einops", "tensorcraft.einstein")}
FACES = {"tensorcraft": PACKAGE / "__init__.py", COMPILER: PACKAGE / "compiler" / "__init__.py"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(name: str, source: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, what) for every tensorcraft import in the source of module ``name``: a module, or
    ``module:name`` for a name taken from a module (a name that is itself a submodule counts as that module)."""
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tensorcraft"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            if source_module.split(".")[0] != "tensorcraft":
                continue
            for alias in node.names:
                sub = f"{source_module}.{alias.name}"
                found.append((node.lineno, sub if _is_module(sub) else f"{source_module}:{alias.name}"))
    return found


def _unit(module: str) -> str | None:
    """The layer unit of a module of the compiler (``passes`` for tensorcraft.compiler.passes.dce), else None."""
    if module == COMPILER or not module.startswith(COMPILER + "."):
        return None
    return module[len(COMPILER) + 1:].split(".")[0].split(":")[0]


SOURCES = sorted((PACKAGE / "compiler").rglob("*.py"))


def test_every_module_of_the_compiler_has_a_layer():
    units = {_unit(_module_name(p)) for p in SOURCES} - {None}
    assert units <= set(LAYERS), f"add {sorted(units - set(LAYERS))} to LAYERS"


def _violations(here: str, source: str, is_package: bool = False) -> list[str]:
    unit = _unit(here)
    wrong = []
    for line, what in _imports(here, source, is_package):
        module = what.split(":")[0]
        if module in FACES and ":" in what or what == "tensorcraft":
            wrong.append(f"line {line}: {what} is the face of a package")
        elif unit is None:  # the compiler's own face may gather its stages
            continue
        elif not module.startswith(COMPILER + "."):
            if module not in FOUNDATION and not module.startswith(OTHER_PACKAGES_FOR.get(unit, ("-",))):
                wrong.append(f"line {line}: {what} is outside the compiler and not a foundation module")
        elif _unit(module) != unit and LAYERS[_unit(module)] >= LAYERS[unit]:
            wrong.append(f"line {line}: {what} (layer {LAYERS[_unit(module)]}) is not below "
                         f"{unit} (layer {LAYERS[unit]})")
    return wrong


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: _module_name(p))
def test_imports_only_go_down(path):
    wrong = _violations(_module_name(path), path.read_text(), path.name == "__init__.py")
    assert not wrong, f"{_module_name(path)} imports upwards, sideways or the face:\n" + "\n".join(wrong)


@pytest.mark.parametrize("source, why", [
    ("from ..codegen.kernel import Kernel", "codegen.kernel:Kernel (layer 3) is not below passes (layer 3)"),
    ("from ..pipeline import compile_graph", "pipeline:compile_graph (layer 6) is not below passes"),
    ("import tensorcraft", "tensorcraft is the face"),
    ("from ... import substitute", "tensorcraft:substitute is the face"),
    ("from ...compiler import compile", "tensorcraft.compiler:compile is the face"),
    ("def f():\n    from tensorcraft.einops import rearrange", "outside the compiler"),
])
def test_the_rule_refuses_a_back_reference_and_the_face(source, why):
    """The rule can fail: each line, in a module of passes/, is refused with its reason."""
    wrong = _violations("tensorcraft.compiler.passes.example", source)
    assert len(wrong) == 1 and why in wrong[0], wrong


def test_the_rule_allows_what_goes_down():
    source = "from ... import trees\nfrom ...stages import swappable\nfrom ..ir import Graph\nfrom ..plans import Kernel"
    assert _violations("tensorcraft.compiler.passes.example", source) == []
