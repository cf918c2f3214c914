"""grader.worker.provisioner.GradingProvisioner: the one place a grading kernel's start is decided. A kernel
is forked where a fork server can be had and started in a sandbox of its own where not; an interrupt
reaches it; its end leaves no process behind, whichever way it started."""
import asyncio

import psutil
import pytest
from jupyter_client.manager import AsyncKernelManager

from grader.worker import fork_client
from grader.worker.provisioner import GradingProvisioner
from grader.worker.sandbox import claim_uid, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"no sandbox here: {unavailable()}")

BUSY = "import subprocess, time\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\nwhile True:\n    time.sleep(0.01)"


async def _reply(kc, msg_id: str, timeout: float = 60) -> dict:
    while True:
        reply = await kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]


async def _run_a_kernel(box, fork: bool):
    """Start a kernel in ``box``, run a busy cell that starts a child, interrupt it, kill the kernel
    (which must end it), then shut it down (whose clean-up must end the child). Returns the
    provisioner, the name of the process it started (bubblewrap where spawned), the interrupted
    cell's reply, and the kernel's processes (psutil handles: they tell a reused pid apart)."""
    km = AsyncKernelManager(kernel_name="python3")
    km.provisioner = GradingProvisioner.for_kernel(km, box, fork)
    await km.start_kernel(extra_arguments=["--IPKernelApp.log_level=ERROR"])
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=120)
        provisioner = km.provisioner
        busy = kc.execute(BUSY)
        kernel = psutil.Process(provisioner.pid)
        for _ in range(200):           # until the orphan-to-be runs
            family = [kernel, *kernel.children(recursive=True)]
            names = [p.name() for p in family]
            if "sleep" in names:
                break
            await asyncio.sleep(0.05)
        await km.interrupt_kernel()
        interrupted = await _reply(kc, busy)
        pid_1 = psutil.Process(provisioner.pid).name() if not provisioner.forked else "forked"
        await provisioner.kill()
        await asyncio.wait_for(provisioner.wait(), timeout=10)
        assert _running([kernel]) == [] and not provisioner.has_process, "kill did not end the kernel"
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
    assert "sleep" in names, "the cell's child was not seen"
    return provisioner, pid_1, interrupted, family


def _running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running (a zombie runs nothing: one re-parented to the machine's init waits there to be reaped)."""
    def runs(process: psutil.Process) -> bool:
        try:
            return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    return [p for p in processes if runs(p)]


def _scenario(fork: bool):
    with fork_client.sandbox_for_a_learner([], claim_uid()) as box:
        box.prepare()
        return asyncio.run(_run_a_kernel(box, fork))


def test_a_kernel_is_forked_where_a_server_is_up_and_leaves_nothing_running():
    provisioner, _, interrupted, family = _scenario(fork=True)
    server = fork_client.running()
    assert server is not None and provisioner.forked and provisioner.server is server
    assert interrupted["status"] == "error" and interrupted["ename"] == "KeyboardInterrupt"
    assert _running(family) == [], "a process of the kernel outlived its clean-up"
    assert psutil.Process(server.pid).children() == [], "the server still has children"
    assert not provisioner.has_process and provisioner.pidfd is None


def test_without_a_server_a_kernel_starts_in_a_sandbox_of_its_own_and_leaves_nothing_running(monkeypatch):
    fork_client.stop()
    monkeypatch.setenv(fork_client.SWITCH, "off")
    provisioner, pid_1, interrupted, family = _scenario(fork=True)
    assert not provisioner.forked and fork_client.running() is None
    assert pid_1 == "bwrap", "the kernel did not start in a sandbox of its own"
    assert interrupted["status"] == "error" and interrupted["ename"] == "KeyboardInterrupt"
    assert _running(family) == [], "a process of the kernel outlived its clean-up"


def test_the_end_of_a_forked_kernel_is_awaited_on_its_pidfd_not_polled_for(monkeypatch):
    """``GradingProvisioner.ended`` (and the manager's wait after a kill) wakes when the process ends: a
    process that ends 0.3 s later is seen ended with no sleep in between."""
    import os
    import subprocess

    from grader.worker.provisioner import GradingKernelManager
    child = subprocess.Popen(["sleep", "0.3"])
    provisioner = GradingProvisioner()
    provisioner.pidfd = os.pidfd_open(child.pid)

    async def no_polling(*args, **kwargs):
        raise AssertionError("polled with asyncio.sleep")

    async def wait_for_the_end():
        manager = GradingKernelManager()
        manager.provisioner = provisioner
        assert await provisioner.poll() is None
        monkeypatch.setattr(asyncio, "sleep", no_polling)
        await manager._async_wait()
        assert await provisioner.poll() is not None

    try:
        asyncio.run(wait_for_the_end())
    finally:
        provisioner._close_pidfd()
        child.wait()
