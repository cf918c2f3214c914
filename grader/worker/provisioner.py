"""How a grading kernel starts, is interrupted and ends: one jupyter_client kernel provisioner.

:class:`GradingProvisioner` is jupyter_client's documented seam (``KernelProvisionerBase``, here
through ``LocalProvisioner``) for where a kernel runs. It decides once, in :meth:`pre_launch`, how
the kernel starts:

- **fork**: forked by the worker thread's fork server in ``sandbox`` (:mod:`grader.worker.fork_client`),
  when ``fork`` is asked for and a server can be had; it is not our child, so it is watched and
  signalled through a pidfd, immune to pid reuse;
- **spawn**: a fresh process, its command run through ``sandbox.wrap`` (bubblewrap), when no
  server can be had, or the server fails to fork (then it is stopped, and the next learner gets a
  new one);
- **unconfined**: no sandbox (``--unsafe``): jupyter_client's own ``LocalProvisioner`` as is.

In a sandbox the kernel talks over ``ipc`` transport (ZeroMQ on unix sockets in the scratch folder:
the sandbox has no network), its connection file is written there and handed to the sandbox's uid,
and what it prints to its own stdout/stderr is dropped. An interrupt is a SIGINT sent to the
processes inside the sandbox (:func:`grader.worker.sandbox.interrupt`): one sent to bubblewrap would not
reach them. Clean-up ends whatever the kernel left running (the server's other children, or the
sandbox uid's processes), so that a kernel's end leaves no process behind.

Handed to the kernel manager by :class:`grader.worker.execute.GuardedExecute` (``km.provisioner`` is set
before ``start_kernel``; jupyter_client then uses it as it is), not found by entry point: it needs
the live ``Sandbox`` and fork setting of one learner's run, which a kernel spec cannot carry.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import subprocess
import typing as t
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

from . import fork_client
from .sandbox import Sandbox, interrupt


class GradingProvisioner(LocalProvisioner):
    """A kernel in ``sandbox`` (None: unconfined), forked from its fork server when ``fork`` and one
    can be had, else started on its own (see the module's docstring)."""

    sandbox: Sandbox | None = None
    fork: bool = False
    server: fork_client.ForkServer | None = None   # the server that forked the kernel, if one did
    pidfd: int | None = None                        # a forked kernel's: it is not our child

    @classmethod
    def for_kernel(cls, km, sandbox: Sandbox | None, fork: bool = False) -> GradingProvisioner:
        """The provisioner of ``km``'s next kernel."""
        provisioner = cls(kernel_id=km.kernel_id, kernel_spec=km.kernel_spec, parent=km)
        provisioner.sandbox, provisioner.fork = sandbox, fork
        return provisioner

    @property
    def forked(self) -> bool:
        return self.server is not None

    @property
    def has_process(self) -> bool:
        return self.pidfd is not None or super().has_process

    async def pre_launch(self, **kwargs: t.Any) -> dict[str, t.Any]:
        sandbox, km = self.sandbox, self.parent
        if sandbox is None:
            return await super().pre_launch(**kwargs)
        self.server = fork_client.server_for(sandbox) if self.fork else None
        km.transport, km.ip = "ipc", str(sandbox.scratch / "kernel")
        km.connection_file = str(sandbox.scratch / "kernel.json")
        kwargs["cwd"] = str(sandbox.scratch)
        kwargs["stdout"] = kwargs["stderr"] = subprocess.DEVNULL   # not a cell's output: no one's business
        kwargs = await super().pre_launch(**kwargs)     # writes the connection file, formats the command
        sandbox.give(Path(km.connection_file))
        if self.server is None:
            kwargs["cmd"] = sandbox.wrap(kwargs["cmd"])
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: t.Any):
        if self.server is not None:
            try:
                pid = self.server.fork(cmd)
                self.pidfd = os.pidfd_open(pid)
            except OSError:         # the server is gone (killed from outside): this kernel starts on its own
                fork_client.stop()
                self.server, cmd = None, self.sandbox.wrap(cmd)
            else:
                self.pid, self.pgid, self.cwd = pid, None, kwargs.get("cwd")
                return self.connection_info
        return await super().launch_kernel(cmd, **kwargs)

    async def poll(self) -> int | None:
        if self.pidfd is None:
            return await super().poll()
        ended = select.select([self.pidfd], [], [], 0)[0]
        return -signal.SIGKILL if ended else None      # its exit status went to the server, not to us

    async def wait(self) -> int | None:
        if self.pidfd is None:
            return await super().wait()
        await self.ended()
        status = await self.poll()
        self._close_pidfd()
        return status

    async def ended(self) -> None:
        """Returns when the forked kernel has ended: its pidfd turns readable, woken by the event loop,
        not found by polling (jupyter_client polls every 0.1 s: 0.1 s a learner, a core left idle)."""
        if self.pidfd is None or await self.poll() is not None:
            return
        loop = asyncio.get_running_loop()
        gone = loop.create_future()
        loop.add_reader(self.pidfd, lambda: gone.done() or gone.set_result(None))
        try:
            await gone
        finally:
            loop.remove_reader(self.pidfd)

    async def send_signal(self, signum: int) -> None:
        if signum == signal.SIGINT and self.sandbox is not None and self.pid is not None and self.has_process:
            interrupt(self.pid, itself=self.forked)     # the processes inside, not bubblewrap
        elif self.pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signum)
        else:
            await super().send_signal(signum)

    async def kill(self, restart: bool = False) -> None:
        if self.pidfd is None:
            return await super().kill(restart)
        await self.send_signal(signal.SIGKILL)

    async def terminate(self, restart: bool = False) -> None:
        if self.pidfd is None:
            return await super().terminate(restart)
        await self.send_signal(signal.SIGTERM)

    async def cleanup(self, restart: bool = False) -> None:
        """Also end what the kernel left running: the fork server's other children (a server whose
        children outlive it is given up), or the sandbox uid's processes."""
        self._close_pidfd()
        await super().cleanup(restart)
        if self.server is not None:
            try:
                self.server.clear()
            except OSError:
                fork_client.stop()
        elif self.sandbox is not None:
            self.sandbox.end()

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None



class GradingKernelManager(AsyncKernelManager):
    """jupyter_client's manager, but a killed forked kernel is awaited on its pidfd
    (:meth:`GradingProvisioner.ended`) instead of polled for every 0.1 s."""

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        if isinstance(self.provisioner, GradingProvisioner) and self.provisioner.pidfd is not None:
            await self.provisioner.ended()
            return
        await super()._async_wait(pollinterval)
