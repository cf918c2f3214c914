"""`make test-gpu`: every check that needs a GPU, in one command, with its results in one folder.

On a machine with a CUDA device it runs, each part under its own time limit (under 8 minutes in all):

1. ``cuda-tests``: the tests marked ``cuda`` (pytest ``-m cuda``);
2. ``triton-native``: the Triton tests compiled for the GPU, not interpreted (``TRITON_INTERPRET`` unset);
3. ``grader-check``: ``python -m grader check``, whose checks run their CUDA groups where a device is
   present (the grading sandbox binds ``/dev/nvidia*``);
4. ``benchmarks``: the side-by-side benchmarks on the GPU (``python -m benchmarks einsum --device cuda``).

Everything lands in ``$OUT`` if set, else ``build/gpu-results/``: ``device.txt`` (what ran where),
one ``<part>.log`` per part, pytest's ``<part>.xml`` (JUnit) and ``summary.txt``, which says per part
whether it passed, failed, or was skipped and why (no CUDA device, a missing package). The exit
status is 0 only if no part that could run failed. Where there is no CUDA device every part is
skipped, saying so: the CPU paths are what ``make test`` runs.

It runs with the interpreter that runs it (``make test-gpu`` uses the project's .venv; on a GPU
machine with its own torch, ``python3 scripts/test_gpu.py``): the repository and ``lib/`` are put on
``PYTHONPATH``, so the project need not be installed there.
"""
from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Part:
    name: str
    what: str
    command: list[str]
    limit_s: int
    needs: tuple[str, ...]          # modules that must import
    junit: bool = False


def parts(python: str) -> list[Part]:
    pytest = [python, "-m", "pytest", "-p", "no:cacheprovider", "-ra", "-q"]
    return [
        Part("cuda-tests", "the tests marked cuda (the Triton one in the next part)",
             [*pytest, "-m", "cuda", "-k", "not triton", "tests"], 60,
             ("pytest", "hypothesis", "einops", "opt_einsum", "numpy"), junit=True),
        Part("triton-native", "the Triton kernel checks compiled for the GPU (TRITON_INTERPRET unset)",
             [*pytest, "tests/compiler", "-k", "triton and not interpreter"], 120, ("pytest", "triton"), junit=True),
        Part("grader-check", "python -m grader check: every notebook, its checks' CUDA groups included",
             [python, "-m", "grader", "check"], 240, ("nbgrader", "nbclient", "jupytext", "ipykernel")),
        Part("benchmarks", "python -m benchmarks einsum --device cuda: ours and torch's side by side on the GPU",
             [python, "-m", "benchmarks", "einsum", "--quick", "--device", "cuda"], 40, ("opt_einsum",)),
    ]


def cuda_reason() -> str | None:
    """Why nothing can run on a GPU here, or None when a CUDA device is present."""
    try:
        import torch
    except ImportError as error:
        return f"torch cannot be imported ({error})"
    if not torch.cuda.is_available():
        return f"no CUDA device (torch {torch.__version__}: torch.cuda.is_available() is False)"
    return None


def missing(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def describe_device(out: Path) -> None:
    lines = [f"python {platform.python_version()} ({sys.executable}) on {platform.platform()}"]
    try:
        import torch
        lines.append(f"torch {torch.__version__}, CUDA {torch.version.cuda}, available: {torch.cuda.is_available()}")
        if torch.cuda.is_available():
            lines += [f"device {i}: {torch.cuda.get_device_name(i)}" for i in range(torch.cuda.device_count())]
    except ImportError as error:
        lines.append(f"torch: not importable ({error})")
    try:
        import triton
        lines.append(f"triton {triton.__version__}")
    except ImportError:
        lines.append("triton: not installed")
    try:
        lines.append(subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout)
    except (OSError, subprocess.TimeoutExpired):
        lines.append("nvidia-smi: not found")
    (out / "device.txt").write_text("\n".join(lines) + "\n")


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}   # native Triton, never the interpreter
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "lib"), str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run(part: Part, out: Path) -> tuple[str, str]:
    """(status, detail): "passed", "failed" or "skipped", and why or how long."""
    absent = missing(part.needs)
    if absent:
        return "skipped", f"not installed here: {', '.join(absent)}"
    command = [*part.command, *([f"--junitxml={out / f'{part.name}.xml'}"] if part.junit else [])]
    log = out / f"{part.name}.log"
    started = time.monotonic()
    with log.open("w") as stream:
        stream.write(f"$ {' '.join(command)}\n")
        stream.flush()
        try:
            code = subprocess.run(command, cwd=ROOT, env=environment(), stdout=stream, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=part.limit_s).returncode
        except subprocess.TimeoutExpired:
            return "failed", f"did not finish within {part.limit_s} s (log: {log})"
    seconds = time.monotonic() - started
    tail = log.read_text().strip().splitlines()[-1:] or [""]
    if code != 0:
        return "failed", f"exit {code} after {seconds:.0f} s: {tail[0][:200]} (log: {log})"
    return "passed", f"{seconds:.0f} s: {tail[0][:200]}"


def main() -> int:
    out = Path(os.environ.get("OUT") or ROOT / "build" / "gpu-results")
    out.mkdir(parents=True, exist_ok=True)
    describe_device(out)
    no_gpu = cuda_reason()
    lines, failed = [], False
    for part in parts(sys.executable):
        status, detail = ("skipped", no_gpu) if no_gpu else run(part, out)
        failed |= status == "failed"
        lines.append(f"{part.name:<14} {status:<8} {detail}\n{'':<24}({part.what})")
        print(lines[-1], flush=True)
    verdict = "FAILED: a part that ran failed" if failed else (
        "nothing ran: every part needs a CUDA device" if no_gpu else "every part that could run passed")
    lines.append(verdict)
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print(f"{verdict}; results in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
