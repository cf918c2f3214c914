"""The sandbox one kernel runs in: what it can read, write and reach; and autograde's refusal
to run without one unless told --unsafe."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.worker import sandbox as sandbox_module
from grader.instructor.autograde import NoSandboxError, autograde, sandboxed
from grader.cli import main as cli_main
from grader.course import REPO, Course
from grader.worker.sandbox import Limits, Sandbox, claim_uid, unavailable

needs_sandbox = pytest.mark.skipif(unavailable() is not None, reason=f"no sandbox here: {unavailable()}")

PROBE = r'''
import json, os, socket, resource, sys
def can(action):
    try:
        action()
        return True
    except OSError:
        return False
paths = json.loads(sys.argv[1])
report = {
    "uid": os.getuid(),
    "sees_masked": [p for p in paths["masked"] if os.path.exists(p) and os.listdir(p)],
    "writes_readable": can(lambda: open(os.path.join(paths["readable"], "x"), "w")),
    "writes_scratch": can(lambda: open("written", "w")),
    "reads_course_code": os.path.exists(os.path.join(paths["repo"], "grader", "checks", "exercise.py")),
    "network": can(lambda: socket.create_connection(("127.0.0.1", paths["port"]), timeout=2)),
    "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
    "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
    "memory": resource.getrlimit(resource.RLIMIT_AS)[0],
    "import_torch": __import__("importlib").util.find_spec("torch") is not None,
    "home": os.environ.get("HOME"),
    "cwd": os.getcwd(),
}
print(json.dumps(report))
'''


@needs_sandbox
def test_a_sandboxed_process_sees_only_its_scratch_and_the_course_code(tmp_path):
    masked = tmp_path / "course"
    (masked / "submitted").mkdir(parents=True)
    (masked / "gradebook.db").write_text("grades")
    folder = tmp_path / "sandboxes"
    folder.mkdir()
    folder.chmod(0o711)
    box = Sandbox(folder / "scratch", masked=[masked], uid=claim_uid(), limits=Limits(processes=50))
    box.prepare()
    server = __import__("socket").create_server(("127.0.0.1", 0))
    paths = {"masked": [str(masked)], "readable": str(REPO / "lib"), "repo": str(REPO),
             "port": server.getsockname()[1]}
    result = subprocess.run(box.wrap([sys.executable, "-c", PROBE, json.dumps(paths)]),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["sees_masked"] == []
    assert not report["writes_readable"] and report["writes_scratch"]
    assert report["reads_course_code"] and report["import_torch"]
    assert not report["network"]
    assert report["processes"] <= 3              # bwrap's init, the probe: no process of ours
    assert report["memory"] == Limits().memory_bytes
    assert report["home"] == report["cwd"] == str(box.scratch)
    if os.getuid() == 0:
        assert report["uid"] == box.uid != 0 and report["nproc"] == 50
    assert (box.scratch / "written").exists()


def test_autograde_refuses_to_run_without_a_sandbox_unless_told_unsafe(monkeypatch, tmp_path, capsys):
    reason = "bwrap not found; install bubblewrap"
    monkeypatch.setattr("grader.instructor.autograde.unavailable", lambda: reason)
    with pytest.raises(NoSandboxError, match="refusing to run learners' code without a sandbox: bwrap not found"):
        autograde(tmp_path, Course(tmp_path / "course"), isolation="sandbox")
    assert sandboxed("unsafe") is False and sandboxed("auto") is False
    code = cli_main(["autograde", str(tmp_path), "--course", str(tmp_path / "course")])
    assert code == 2 and "install bubblewrap" in capsys.readouterr().err
    with pytest.raises(ValueError, match="isolation='none'"):
        sandboxed("none")


def _sandbox(tmp_path: Path, name: str) -> Sandbox:
    folder = tmp_path / name
    folder.mkdir()
    folder.chmod(0o711)
    box = Sandbox(folder / "scratch", uid=claim_uid())
    box.end()
    box.prepare()
    return box


def _run_cells(box: Sandbox, sources: list[str], timeout: int = 60):
    import nbformat

    from grader.worker.execute import GuardedExecute
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    executor = GuardedExecute(sandbox=box, timeout=timeout, kernel_name="python3")
    try:
        notebook, _ = executor.preprocess(notebook, {"metadata": {"path": str(box.scratch)}})
    finally:
        box.end()
    return notebook, executor


@needs_sandbox
def test_a_cell_past_its_limit_is_interrupted_inside_the_sandbox_and_the_next_cells_run(tmp_path):
    notebook, executor = _run_cells(_sandbox(tmp_path, "box"), [
        "while True:\n    pass",                                         # busy in Python
        "print('still here')",
        "import subprocess\nsubprocess.run(['sleep', '60'])"], timeout=5)  # waiting on a child process
    assert executor.lost is None, executor.lost
    assert [o.get("ename") for o in notebook.cells[0].outputs] == ["KeyboardInterrupt", "CellTimeoutError"]
    assert "this cell ran past its 5 s time limit" in notebook.cells[0].outputs[1].traceback[0]
    assert notebook.cells[1].outputs[0].text == "still here\n"
    assert [o.get("ename") for o in notebook.cells[2].outputs][0] == "KeyboardInterrupt"


@needs_sandbox
def test_one_hung_function_costs_one_time_limit_not_one_per_cell(tmp_path):
    """A function interrupted at the limit is marked hung: the later cells that name it are not run,
    each saying why (with the limit in seconds); the others run as ever."""
    notebook, executor = _run_cells(_sandbox(tmp_path, "box"), [
        "import time\ndef hangs():\n    while True:\n        time.sleep(0.1)",
        "hangs()", "print('quick')", "hangs()", "x = [hangs]", "print('still runs')"], timeout=4)
    names = [[o.get("ename") for o in cell.outputs if o.output_type == "error"] for cell in notebook.cells]
    assert names[1] == ["KeyboardInterrupt", "CellTimeoutError"] and names[2] == []
    assert names[3:5] == [["CellNotRun"]] * 2
    assert notebook.cells[3].outputs[0].evalue == \
        "this cell did not run: it uses hangs, which ran past the 4 s time limit in cell 2"
    assert notebook.cells[5].outputs[0].text == "still runs\n"
    assert executor.lost is None


def _one_notebook_course(tmp_path: Path, monkeypatch, source: str) -> Course:
    """A course of one notebook, ``demo``, whose one code cell is ``source``; compiled code is kept
    under ``tmp_path / "kept"``."""
    import nbformat
    monkeypatch.setenv("TENSORCRAFT_CACHE_DIR", str(tmp_path / "kept"))
    course = Course(tmp_path / "course")
    course.source("demo").parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), course.source("demo"))
    return course


COMPILES = ("import torch, tensorcraft as tc\n"
            "from tensorcraft.compiler.codegen import c_toolchain\n"
            "tc.compile(lambda x: (x * 3 + 1).relu(), backend='c')(torch.randn(4, 5))\n"
            "print(c_toolchain.compile_count, c_toolchain.cache_dir())")


@needs_sandbox
def test_every_sandbox_starts_with_its_own_copy_of_the_code_the_solution_compiled(tmp_path, monkeypatch):
    from shutil import which

    from grader.worker import compile_cache
    from grader.worker.execute import prefill
    if which("cc") is None and which("gcc") is None:
        pytest.skip("no C compiler here: tensorcraft's C backend cannot compile")
    course = _one_notebook_course(tmp_path, monkeypatch, COMPILES)
    kept = compile_cache.warm_cache(course, "demo")
    assert kept is not None and kept.parent == tmp_path / "kept" / compile_cache.FOLDER
    libraries = sorted(p.relative_to(kept) for p in kept.rglob("*.so"))
    assert libraries, "the solution's run kept no compiled library"

    box = _sandbox(tmp_path, "learner")
    prefill(kept, box)
    notebook, _ = _run_cells(box, [COMPILES, "open(c_toolchain.cache_dir() / 'c' / 'planted.so', 'w').write('x')"])
    count, folder = notebook.cells[0].outputs[0].text.split()
    assert count == "0", "the learner's kernel compiled again instead of finding the kernel in its cache"
    assert Path(folder).is_relative_to(box.scratch)
    assert not list(kept.rglob("planted.so")), "a learner's write reached the kept cache"
    assert compile_cache.warm_cache(course, "demo") == kept        # made once, found after


INDUCTOR_COMPILES = ("import torch\n"
                     "def chain(x):\n    return (x * 3 + 1).relu()\n"
                     "torch.compile(chain)(torch.randn(4, 5))")


@needs_sandbox
def test_a_learner_whose_inductor_compile_hits_the_prefilled_cache_builds_no_cpp(tmp_path, monkeypatch):
    """Inside the sandbox, not only outside: Inductor finds the solution's graph (``fxgraph_cache_hit``)
    and runs the C++ compiler not once (no kernel, no precompiled header: ``sandbox.COMPILE_SETTINGS``)."""

    from grader.worker import compile_cache
    from grader.worker.execute import prefill
    course = _one_notebook_course(tmp_path, monkeypatch, INDUCTOR_COMPILES)
    kept = compile_cache.warm_cache(course, "demo")
    assert kept is not None and list(kept.rglob("fxgraph/**/*")), "the solution's run kept no Inductor graph"

    box = _sandbox(tmp_path, "learner")
    prefill(kept, box)
    counting = ("from torch._inductor import cpp_builder\n"
                "from torch._dynamo.utils import counters\n"
                "built, build = [], cpp_builder.CppBuilder.build\n"
                "cpp_builder.CppBuilder.build = lambda self: (built.append(self), build(self))[1]\n")
    notebook, _ = _run_cells(box, [counting + INDUCTOR_COMPILES + "\nprint(counters['inductor']['fxgraph_cache_hit'], len(built))"],
                             timeout=300)
    hits, builds = notebook.cells[0].outputs[-1].text.split()
    assert hits == "1", "the learner's Inductor compile missed the prefilled cache"
    assert builds == "0", "the learner's kernel ran the C++ compiler although its compile hit the cache"


def test_the_kept_cache_is_named_by_the_sandbox_compile_settings_too(tmp_path, monkeypatch):
    """Inductor's keys hold its settings: a kept cache made under other settings would miss for every learner."""
    from grader.worker import compile_cache
    course = _one_notebook_course(tmp_path, monkeypatch, COMPILES)
    now = compile_cache.cache_path(course, "demo")
    monkeypatch.setitem(compile_cache.COMPILE_SETTINGS, "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS", "1")
    assert compile_cache.cache_path(course, "demo") != now
    assert sandbox_module.COMPILE_SETTINGS.items() <= _sandbox(tmp_path, "box").environment().items()


def test_the_kept_cache_is_named_by_the_installation_that_compiles(tmp_path, monkeypatch):
    """Inductor's compile command names torch's and Python's folders: a cache kept by another virtual
    environment (same torch version) would miss for every learner, who would all compile from nothing."""
    import torch

    from grader.worker import compile_cache
    course = _one_notebook_course(tmp_path, monkeypatch, COMPILES)
    version, folder = compile_cache.torch_installation()      # read without importing torch
    assert version == torch.__version__ and folder == str(Path(torch.__file__).resolve().parent)
    now = compile_cache.cache_path(course, "demo")
    installed = compile_cache.torch_installation
    monkeypatch.setattr(compile_cache, "torch_installation", lambda: [version, str(tmp_path / "other-venv" / "torch")])
    assert compile_cache.cache_path(course, "demo") != now
    monkeypatch.setattr(compile_cache, "torch_installation", installed)
    assert compile_cache.cache_path(course, "demo") == now
    monkeypatch.setattr(compile_cache, "_processor", lambda: "another processor")
    assert compile_cache.cache_path(course, "demo") != now


def test_a_kernels_openmp_threads_sleep_between_regions_unless_the_instructor_says_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    box = Sandbox(tmp_path / "scratch")
    assert box.environment()["OMP_WAIT_POLICY"] == "passive"
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    assert box.environment()["OMP_WAIT_POLICY"] == "active"


def test_the_kept_cache_of_another_version_of_a_notebook_goes_once_unused_for_a_month(tmp_path, monkeypatch):
    import time


    from grader.worker import compile_cache
    course = _one_notebook_course(tmp_path, monkeypatch, COMPILES)
    current = compile_cache.cache_path(course, "demo")
    current.mkdir(parents=True)
    (current / "kernel.so").write_text("made by an earlier run")
    old, recent, other = (current.parent / name for name in ("demo-" + "0" * 16, "demo-" + "1" * 16,
                                                               "demo-b-" + "2" * 16))   # the last: another notebook's
    for folder, unused in ((old, compile_cache.STALE_AFTER + 3600), (recent, 3600), (other, compile_cache.STALE_AFTER + 3600)):
        folder.mkdir()
        os.utime(folder, (time.time() - unused,) * 2)
    assert compile_cache.warm_cache(course, "demo") == current
    assert not old.exists()
    assert recent.exists() and other.exists() and (current / "kernel.so").exists()
    assert time.time() - current.stat().st_mtime < 60, "the cache in use was not marked as used"


@needs_sandbox
def test_a_masked_folder_inside_a_readable_one_is_covered_and_the_code_inside_it_bound_again(tmp_path):
    """A checkout under a folder the kernel reads (the course cloned into /opt, say): its instructor
    files are covered, the course code inside it stays readable, and nothing can be written there."""
    outer = tmp_path / "opt"
    checkout = outer / "course"
    (checkout / "solutions").mkdir(parents=True)
    (checkout / "solutions" / "answers.py").write_text("secret")
    (checkout / "grader").mkdir()
    (checkout / "grader" / "checks.py").write_text("code")
    (outer / "other_tool").write_text("tool")
    box = _sandbox(tmp_path, "box")
    box.readable, box.masked = [outer, checkout / "grader"], [checkout]
    probe = ("import os, json\n"
             f"c = {str(checkout)!r}\n"
             "def writes(p):\n    try:\n        open(p, 'w').close(); return True\n    except OSError:\n        return False\n"
             "print(json.dumps({'listing': sorted(os.listdir(c)), 'code': open(c + '/grader/checks.py').read(),\n"
             f"  'tool': open({str(outer / 'other_tool')!r}).read(), 'writes': writes(c + '/planted')}}))")
    result = subprocess.run(box.wrap([sys.executable, "-c", probe]), capture_output=True, text=True, timeout=120)
    box.end()
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"listing": ["grader"], "code": "code", "tool": "tool", "writes": False}


def test_the_checkout_the_course_code_comes_from_is_masked_but_its_packages_are_read():
    """Binding the packages, not the checkout: the sandbox's readable paths hold no folder of the
    checkout but the packages and the environment."""
    readable = sandbox_module._python_paths()
    assert REPO in sandbox_module._checkouts()
    inside = {p.relative_to(REPO).parts[0] for p in readable if p.is_relative_to(REPO)}
    assert inside <= {"grader", "lib", Path(sys.prefix).name}, inside
    assert REPO not in readable and REPO / "lib" not in readable


@needs_sandbox
def test_a_graded_cell_can_read_no_solution_and_import_no_test(tmp_path):
    """Issue 20: the sandbox shows the kernel only what the checks need. A graded cell that reads the
    instructor's solutions or imports the test suite (its solution_cells hold every right answer) fails;
    the checks themselves still import."""
    solutions, tests = REPO / "solutions", REPO / "tests"
    assert (solutions / "04_einsum_fast.py").exists() and (tests / "grader" / "solution_cells.py").exists()
    notebook, executor = _run_cells(_sandbox(tmp_path, "box"), [
        f"open({str(solutions / '04_einsum_fast.py')!r}).read()",
        f"import os\nos.listdir({str(solutions)!r})",
        "import tests",
        f"import sys\nsys.path.append({str(tests / 'grader')!r})\nimport solution_cells",
        "import grader.checks.nb04_einsum_fast\nprint('checks import')"])
    errors = [[o.ename for o in cell.outputs if o.output_type == "error"] for cell in notebook.cells]
    assert errors[:4] == [["FileNotFoundError"], ["FileNotFoundError"], ["ModuleNotFoundError"],
                          ["ModuleNotFoundError"]], errors
    assert errors[4] == [] and notebook.cells[4].outputs[0].text == "checks import\n"
    assert executor.lost is None
