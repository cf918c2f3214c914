"""Where a submission's grading time goes (grader.worker.timings): steps add up, cells are sorted by kind,
and a process's CPU seconds are read from /proc, its children's included."""
import os
import subprocess
import sys
import time

from grader.worker.timings import Timings, cell_kind, cell_step, cpu_seconds, phase


def test_a_step_measured_twice_adds_up():
    timings = Timings()
    for _ in range(2):
        with timings.measure("kernel start"):
            time.sleep(0.01)
    timings.add("kernel start", 1.0)
    assert 1.02 <= timings["kernel start"] < 1.5


def test_a_step_is_measured_when_its_body_raises():
    timings = Timings()
    try:
        with timings.measure("cell"):
            raise ValueError
    except ValueError:
        pass
    assert "cell" in timings


def test_cells_are_summed_by_kind_and_the_graders_steps_by_name():
    assert cell_kind("check_outer(outer)", graded=True) == "checks"
    assert cell_kind("compiled = torch.compile(model)\ncompiled(x)", graded=False) == "compile"
    assert cell_kind("import torch\nfrom torch import nn\n# a comment\ntorch.manual_seed(0)", graded=False) == "imports"
    assert cell_kind("x = torch.randn(3)\ny = x + 1\nprint(y)", graded=False) == "cell"
    assert cell_kind("", graded=False) == "cell"
    assert phase(cell_step(11, "checks")) == "checks" and cell_step(11, "checks") == "cell 12 [checks]"
    assert phase("kernel start") == "kernel start"


def test_cpu_seconds_count_the_process_and_the_children_it_waited_for():
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\n{burn}"
                               f"subprocess.run([sys.executable, '-c', {burn!r}])\nprint('done', flush=True)\n"
                               "time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "done"
        assert cpu_seconds(parent.pid) >= 0.55           # its own 0.3 s and its waited child's 0.3 s
    finally:
        parent.kill()
        parent.wait()
    assert cpu_seconds(parent.pid) == 0.0                # gone
    assert cpu_seconds(os.getpid()) > 0
