"""environment.yml (conda) and pyproject.toml (pip) must pin the very same packages."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _canonical(requirement: str) -> tuple[str, str]:
    """'Opt-Einsum == 3.4.0' -> ('opt-einsum', '3.4.0'); only exact pins are allowed, each with
    an optional environment marker that must agree too ("triton==3.9.0; sys_platform == 'linux'")."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;]+)\s*(?:;\s*(.+?))?\s*", requirement)
    assert match, f"{requirement!r} is not an exact pin NAME==VERSION[; marker]"
    pin = match[2]
    if match[3]:
        pin += "; " + re.sub(r"\s+", " ", match[3].replace('"', "'"))
    return re.sub(r"[-_.]+", "-", match[1]).lower(), pin


def _pyproject_project() -> dict:
    """pyproject.toml's [project] table (tomllib is Python >= 3.11; the course allows 3.10)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pip vendors a TOML reader
        from pip._vendor import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pyproject_pins() -> dict[str, str]:
    project = _pyproject_project()
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return dict(map(_canonical, requirements))


def _conda_pins() -> tuple[dict[str, str], list[str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_lists) == 1, "environment.yml needs exactly one `pip:` list"
    conda_names = [d for d in env["dependencies"] if isinstance(d, str)]
    return dict(map(_canonical, pip_lists[0])), conda_names


def test_every_pyproject_pin_is_in_environment_yml_and_vice_versa():
    pyproject, (conda, _) = _pyproject_pins(), _conda_pins()
    assert pyproject, "pyproject.toml pins nothing"
    assert conda == pyproject, (
        f"only in pyproject.toml: {sorted(pyproject.items() - conda.items())}; "
        f"only in environment.yml: {sorted(conda.items() - pyproject.items())}")


def test_environment_yml_python_satisfies_requires_python():
    _, conda_names = _conda_pins()
    pythons = [n for n in conda_names if n.startswith("python")]
    assert pythons, "environment.yml does not name a python version"
    version = tuple(int(x) for x in pythons[0].split("=")[1].split("."))
    minimum = _pyproject_project()["requires-python"]
    assert version >= tuple(int(x) for x in minimum.lstrip(">=").split("."))
