"""Kernels forked from a fork server in the sandbox: indistinguishable from a kernel started on its
own, and the learners who share a server one after another cannot reach each other or the server."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import psutil
import pytest

from grader.course import REPO
from grader.worker import fork_client
from grader.worker.execute import GuardedExecute
from grader.worker.sandbox import claim_uid, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"no sandbox here: {unavailable()}")

SETTINGS = r'''
import json, os, sys, matplotlib, torch._inductor.config
print(json.dumps({"path": sys.path, "cwd": os.getcwd(), "environment": dict(os.environ), "name": __name__,
                  "compile_threads": torch._inductor.config.compile_threads,
                  "argv0": os.path.basename(sys.argv[0]), "backend": matplotlib.get_backend(),
                  "uid": os.getuid(),
                  "interrupt": str(__import__("signal").getsignal(__import__("signal").SIGINT))}))
'''

LEAVES_THINGS_BEHIND = r'''
import os, pathlib, subprocess
subprocess.run(["sh", "-c", "sleep 600 &"])   # an orphan: the server's child now, not the kernel's
pathlib.Path("/tmp/left_by_a").write_text("a")
startup = pathlib.Path(os.environ["IPYTHONDIR"], "profile_default", "startup")
startup.mkdir(parents=True, exist_ok=True)
(startup / "00-a.py").write_text("LEFT_BY_A = True")                 # would run in the next kernel
pathlib.Path("left_by_a").write_text("a")
locked = pathlib.Path("locked")
locked.mkdir()
(locked / "inside").write_text("a")
locked.chmod(0)
'''

ATTACKS_THE_SERVER = r'''
import ctypes, os, signal
def attempt(action):
    try:
        result = action()
        return "refused" if result == -1 else "done"
    except OSError:
        return "refused"
libc = ctypes.CDLL(None, use_errno=True)
print(json.dumps({
    "parent": os.getppid(),
    "mem": attempt(lambda: open("/proc/1/mem", "rb").read(1)),
    "environ": attempt(lambda: open("/proc/1/environ", "rb").read()),
    "descriptors": attempt(lambda: os.listdir("/proc/1/fd")),
    "ptrace": attempt(lambda: libc.ptrace(16, 1, 0, 0)),            # PTRACE_ATTACH
}))
for signum in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP):
    os.kill(1, signum)                      # PID 1 ignores them all when they come from inside
'''

LOOKS_AROUND = r'''
import json, os, pathlib
from grader.fork_server.server import mount_points
mounts = mount_points()         # the scratch folder, and the course code where it lies under /tmp
left = []
for parent, folders, files in os.walk("/tmp"):
    folders[:] = [f for f in folders if pathlib.Path(parent, f) not in mounts]
    left += [os.path.join(parent, f) for f in files]
    left += [os.path.join(parent, f) for f in folders if not any(pathlib.Path(parent, f) in m.parents for m in mounts)]
print(json.dumps({
    "others": sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())),
    "tmp": left,
    "startup_ran": "LEFT_BY_A" in globals(),
    "scratch": sorted(os.listdir(".")),
}))
'''


def _run(sources: list[str], fork: bool, timeout: int = 60, preload: tuple[str, ...] = (),
         prefilled: dict[str, str] | None = None):
    """Cells run as one learner's notebook in this thread's fork-server sandbox (or in a sandbox of
    their own, ``fork=False``), its scratch folder holding ``prefilled`` (path: text) as a prefilled
    cache would: what each printed, read as JSON where it printed JSON."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    with fork_client.sandbox_for_a_learner([], claim_uid(), preload) as box:
        box.prepare()
        for path, text in (prefilled or {}).items():
            (box.scratch / path).parent.mkdir(parents=True, exist_ok=True)
            (box.scratch / path).write_text(text)
        executor = GuardedExecute(sandbox=box, fork=fork, timeout=timeout, kernel_name="python3")
        notebook, _ = executor.preprocess(notebook, {"metadata": {"path": str(box.scratch)}})
    printed = []
    for cell in notebook.cells:
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        errors = [o.ename for o in cell.outputs if o.output_type == "error"]
        printed.append(json.loads(text) if text.startswith("{") else (text, errors))
    return printed, executor


def test_a_forked_kernel_runs_as_a_kernel_started_on_its_own_would():
    (forked,), _ = _run([SETTINGS], fork=True)
    server = fork_client.running()
    assert server is not None, "no fork server was started"
    (alone,), _ = _run([SETTINGS], fork=False)
    for setting in ("path", "cwd", "environment", "name", "argv0", "backend", "uid", "interrupt", "compile_threads"):
        assert forked[setting] == alone[setting], setting
    assert forked["compile_threads"] == 1     # torch.compile compiles in the kernel, no pool of processes


def test_two_forked_kernels_draw_different_random_numbers():
    source = "import random, numpy, torch\nprint(random.random(), numpy.random.rand(), torch.rand(1).item())"
    (first,), _ = _run([source], fork=True)
    (second,), _ = _run([source], fork=True)
    assert first[0] != second[0]
    assert [first[0].split()[i] != second[0].split()[i] for i in range(3)] == [True] * 3


def test_a_forked_kernel_finds_dynamo_loaded_and_nothing_left_of_the_servers_warm_up():
    """Where the batch names it, the server imported torch._dynamo and compiled once
    (grader.fork_server.server._warm_up): a kernel finds it loaded, with no counter, compiled function or
    TRITON_INTERPRET of the server's; a batch that does not name it gets a server without it."""
    from grader.checks.dynamo import DYNAMO
    source = ("import json, os, sys\nloaded = 'torch._dynamo' in sys.modules\n"
              "import torch._dynamo\nfrom torch._dynamo.utils import counters\n"
              "print(json.dumps({'loaded': loaded, 'interpret': os.environ.get('TRITON_INTERPRET'),"
              " 'counters': {k: dict(v) for k, v in counters.items() if v}}))")
    (forked,), _ = _run([source], fork=True, preload=(DYNAMO,))
    assert forked == {"loaded": True, "interpret": os.environ.get("TRITON_INTERPRET"), "counters": {}}
    (without,), _ = _run([source], fork=True)
    assert without["loaded"] is False


NEVER_LOADS_DYNAMO = """
import os, sys
os.environ["NBGRADER_EXECUTION"] = "autograde"
os.environ["MPLBACKEND"] = "agg"
import nbformat
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
notebook = nbformat.read(sys.argv[1], as_version=4)
for cell in notebook.cells:
    if cell.cell_type == "code":
        result = shell.run_cell(cell.source)
        assert result.success, (cell.source[:200], result.error_in_exec or result.error_before_exec)
assert "torch._dynamo" not in sys.modules, "the solution loaded Dynamo"
"""


@pytest.mark.parametrize("assignment", sorted(fork_client.WITHOUT_DYNAMO))
def test_the_notebooks_whose_servers_skip_dynamo_never_load_it(assignment, built_course):
    """fork_client.WITHOUT_DYNAMO: the solution, run as grading runs it (hidden tests included), ends
    without torch._dynamo imported; and a batch of only such notebooks does not name it."""
    import subprocess
    import sys

    from grader.checks.dynamo import DYNAMO
    from grader.course import NOTEBOOKS
    source = built_course[0].source(assignment)
    assert DYNAMO not in fork_client.preload_for([source])
    assert DYNAMO in fork_client.preload_for([source, NOTEBOOKS / "00_welcome.ipynb"])
    ran = subprocess.run([sys.executable, "-c", NEVER_LOADS_DYNAMO, str(source)], cwd=NOTEBOOKS,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_a_server_warms_inductor_before_its_first_kernel_where_the_kept_code_holds_inductor_graphs(tmp_path):
    """Notebook 10 compiles with Inductor while graded: its kept cache holds Inductor graphs, and the
    server then loads Inductor and hashes its keys before forking anyone (2 CPU s, else paid by each
    worker's first kernel), but leaves the processor's probe for later (in the empty scratch folder it
    would compile its test programs); a batch whose kept code holds none does not pay for it, and
    Triton is still imported for its interpreter where there is no GPU."""
    from grader.course import NOTEBOOKS
    from grader.checks.dynamo import INDUCTOR
    notebook = NOTEBOOKS / "10_code_generation.ipynb"
    kept = tmp_path / "kept"
    assert INDUCTOR not in fork_client.preload_for([notebook], [kept])
    (kept / "torchinductor" / "fxgraph" / "ab").mkdir(parents=True)
    assert INDUCTOR in fork_client.preload_for([notebook], [kept])
    source = ("import json, os, sys\nfrom torch._inductor import codecache, cpu_vec_isa\n"
              "try:\n    codecache.torch_key.set(b'')\n    hashed = False\n"     # (set refuses a value it holds)
              "except RuntimeError:\n    hashed = True\n"
              "print(json.dumps({'loaded': 'torch._inductor.compile_fx' in sys.modules,"
              " 'hashed': hashed,"
              " 'probed': cpu_vec_isa.valid_vec_isa_list.cache_info().currsize > 0,"
              " 'interpret': os.environ.get('TRITON_INTERPRET')}))")
    (warm,), _ = _run([source], fork=True, preload=(INDUCTOR,))
    assert warm == {"loaded": True, "hashed": True, "probed": False,
                    "interpret": os.environ.get("TRITON_INTERPRET")}


def test_the_batch_decides_whether_the_server_imports_nbformat_nbgrader_and_matplotlib():
    """Only notebook 00 imports nbformat and nbgrader (its demo of nbgrader's rule), every notebook but
    00 matplotlib: a server imports those its batch's notebooks import, once for every kernel."""
    from grader.course import NOTEBOOKS
    from grader.checks.dynamo import DYNAMO
    grading, plotting = ("nbformat", "nbgrader.utils"), ("matplotlib_inline.backend_inline", "matplotlib.pyplot")
    checks00, checks07 = "grader.checks.nb00_welcome", "grader.checks.nb07_graph_capture"
    assert fork_client.preload_for([NOTEBOOKS / "00_welcome.ipynb"]) == (*grading, DYNAMO, checks00)
    assert fork_client.preload_for([NOTEBOOKS / "07_graph_capture.ipynb"]) == (*plotting, DYNAMO, checks07)
    assert set(fork_client.preload_for([NOTEBOOKS / "07_graph_capture.ipynb", NOTEBOOKS / "00_welcome.ipynb"])) \
        == {*grading, *plotting, DYNAMO, checks00, checks07}
    source = ("import json, sys\nprint(json.dumps({m: m in sys.modules for m in "
              "('nbformat', 'nbgrader.utils', 'matplotlib.pyplot')}))")
    (plain,), _ = _run([source], fork=True)
    assert plain == {"nbformat": False, "nbgrader.utils": False, "matplotlib.pyplot": False}
    (loaded,), _ = _run([source], fork=True, preload=grading)
    assert loaded == {"nbformat": True, "nbgrader.utils": True, "matplotlib.pyplot": False}
    (again,), _ = _run([source], fork=True)         # another batch: another server
    assert again == plain


def test_where_learners_find_inductor_graphs_prefilled_the_server_loads_inductor_for_the_kernels_after():
    """grader.fork_server.server._warm_inductor: once the server has forked a kernel whose prefilled
    cache holds Inductor graphs, the kernels it forks after find Inductor's compiler loaded and its keys computed."""
    source = ("import json, sys\nloaded = 'torch._inductor.compile_fx' in sys.modules\n"
              "from torch._inductor import codecache\n"
              "def kept(key):   # torch's prefetchable_cache holds the computed key in its closure\n"
              "    cells = dict(zip(key.__code__.co_freevars, key.__closure__))\n"
              "    return cells['_cache'].cell_contents is not key.__globals__['_cache_sentinel']\n"
              "print(json.dumps({'loaded': loaded, 'keys_kept': kept(codecache.torch_key) and kept(codecache.triton_key)}))")
    graphs = {".cache/torchinductor/fxgraph/ab/entry": "a graph the solution compiled"}
    _run([source], fork=True, prefilled=graphs)
    (after,), _ = _run([source], fork=True, prefilled=graphs)
    assert after["loaded"]
    assert after["keys_kept"], "the kernel must hash torch's and Triton's sources again"


def test_a_cache_folder_holds_inductor_graphs_only_with_an_entry_under_fxgraph(tmp_path):
    from grader.checks.dynamo import holds_inductor_graphs
    assert not holds_inductor_graphs(None) and not holds_inductor_graphs(str(tmp_path))
    (tmp_path / "fxgraph").mkdir()
    assert not holds_inductor_graphs(str(tmp_path))
    (tmp_path / "fxgraph" / "ab").mkdir()
    assert holds_inductor_graphs(str(tmp_path))


def test_learners_who_share_a_server_cannot_reach_each_other_or_the_server():
    _run(["print('warm')"], fork=True)
    server = fork_client.running()
    printed, executor = _run([LEAVES_THINGS_BEHIND, "import json", ATTACKS_THE_SERVER, "print('still here')"],
                             fork=True)
    assert executor.lost is None, executor.lost
    attacks = printed[2]
    assert attacks["parent"] == 1, "the kernel was not forked by the server"
    assert {k: v for k, v in attacks.items() if k != "parent"} == {
        "mem": "refused", "environ": "refused", "descriptors": "refused", "ptrace": "refused"}
    assert printed[3] == ("still here\n", [])
    assert fork_client.running() is server and server.alive(), "the server was killed from inside"

    (seen,), _ = _run([LOOKS_AROUND], fork=True)
    assert fork_client.running() is server, "the next learner did not share the server"
    assert seen["others"] == [], "a process of the last learner outlived its kernel"
    assert seen["tmp"] == []
    assert seen["startup_ran"] is False
    assert not {"left_by_a", "locked"} & set(seen["scratch"]), seen["scratch"]


def test_a_cell_past_its_limit_is_interrupted_in_a_forked_kernel():
    printed, executor = _run(["while True:\n    pass", "print('still here')",
                              "import subprocess\nsubprocess.run(['sleep', '60'])"], fork=True, timeout=5)
    assert executor.lost is None, executor.lost
    assert printed[0][1] == ["KeyboardInterrupt", "CellTimeoutError"]
    assert printed[1] == ("still here\n", [])
    assert printed[2][1][0] == "KeyboardInterrupt"      # a hang at module level marks no function hung


def test_a_server_that_died_is_replaced_for_the_next_learner():
    _run(["print('warm')"], fork=True)
    server = fork_client.running()
    os.kill(server.pid, signal.SIGKILL)             # from outside: the OOM killer, an operator
    server.process.wait(timeout=10)
    (printed,), executor = _run(["print('graded')"], fork=True)
    assert printed == ("graded\n", [])
    assert fork_client.running() is not server


ENDS_WITH_ITS_SERVER = r'''
from grader.worker import fork_client
from grader.worker.sandbox import claim_uid
with fork_client.sandbox_for_a_learner([], claim_uid()) as box:
    box.prepare()
    server = fork_client.server_for(box)
print(server.pid, fork_client.scratch())
'''                    # then ends as a grading worker does: multiprocessing's finalizers end the server


def test_a_server_has_ended_with_its_namespace_when_its_worker_has_ended():
    """The server (and every process of its namespace) must be gone before the worker removes the
    scratch folder they run in: killing bubblewrap alone left it running 1.7 s after the worker ended."""
    worker = subprocess.run([sys.executable, "-c", ENDS_WITH_ITS_SERVER], capture_output=True, text=True,
                            timeout=120, cwd=REPO)
    assert worker.returncode == 0, worker.stderr
    pid, scratch = worker.stdout.split()
    assert not Path(scratch).exists()
    try:
        status = psutil.Process(int(pid)).status()
    except psutil.NoSuchProcess:
        status = "gone"
    assert status in ("gone", psutil.STATUS_ZOMBIE), f"the server outlived its worker: {status}"


def test_where_no_server_can_start_each_kernel_starts_in_a_sandbox_of_its_own(monkeypatch, capsys):
    from grader.worker.sandbox import Sandbox
    fork_client.stop()
    monkeypatch.setattr(fork_client, "_refused", [])
    wrap = Sandbox.wrap

    def without_as_pid_1(self, argv, as_pid_1=False):     # a bubblewrap too old for --as-pid-1
        return [a if a != "--as-pid-1" else "--no-such-option" for a in wrap(self, argv, as_pid_1)]
    monkeypatch.setattr(Sandbox, "wrap", without_as_pid_1)
    (printed,), executor = _run(["print(open('/proc/1/comm').read().strip())"], fork=True)
    assert printed == ("bwrap\n", []), "the kernel did not start in a sandbox of its own (bubblewrap's PID 1)"
    assert fork_client.running() is None
    assert "kernels start one by one: the fork server" in capsys.readouterr().err
    (printed,), executor = _run(["print('graded again')"], fork=True)
    assert printed == ("graded again\n", []) and fork_client.running() is None


def test_a_kernel_the_server_cannot_fork_starts_in_a_sandbox_of_its_own(monkeypatch):
    _run(["print('warm')"], fork=True)

    def gone(self, argv):
        raise OSError("the fork server ended")
    monkeypatch.setattr(fork_client.ForkServer, "fork", gone)
    (printed,), executor = _run(["print(open('/proc/1/comm').read().strip())"], fork=True)
    assert printed == ("bwrap\n", []), "the kernel did not start in a sandbox of its own (bubblewrap's PID 1)"
    assert executor.lost is None


def test_the_first_kernel_finds_the_truths_of_the_notebooks_its_batch_names():
    """grader.fork_server.server: the batch's check modules (``fork_client.preload_for``) have their shared
    ground truths computed before the server's first kernel, which then computes none of its own."""
    from grader.checks.dynamo import DYNAMO
    source = ("import json\nfrom grader.checks import truths\nfrom grader.checks.nb07_graph_capture import REFUSAL\n"
              "print(json.dumps({'kept': len(truths._known), 'program': truths.shared(REFUSAL, 'torch.unique', "
              "lambda: 'computed')}))")
    (named,), _ = _run([source], fork=True, preload=(DYNAMO, "grader.checks.nb07_graph_capture"))
    assert named["kept"] > 0 and named["program"] is True
    (unnamed,), _ = _run([source], fork=True, preload=(DYNAMO,))
    assert unnamed == {"kept": 0, "program": "computed"}
