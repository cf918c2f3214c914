"""ruff on the code (rules: pyproject.toml's [tool.ruff]): what it finds fails the suite, with its report."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("lib", "grader", "benchmarks", "scripts", "tests")


def _ruff() -> list[str]:
    """ruff from this environment (the test extras install it), else the one on PATH."""
    beside = Path(sys.executable).with_name("ruff")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("ruff")
    assert found, "ruff is not installed: `pip install -e '.[test]'` (or `make setup`) installs it"
    return [found]


def test_ruff_finds_nothing():
    result = subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", *CODE],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check {' '.join(CODE)}:\n{result.stdout}{result.stderr}"
