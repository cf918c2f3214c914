"""A Jupyter kernel manager that starts its kernel inside a :class:`~grader.sandbox.Sandbox`.

The sandbox has no network, so the kernel talks over ``ipc`` transport: ZeroMQ on unix sockets in
the scratch folder, which the parent reaches through the same path. The connection file is
written there too, and handed to the sandbox's uid. An interrupt is a SIGINT sent to the processes
inside the sandbox (:func:`~grader.sandbox.interrupt`): one sent to bubblewrap would not reach them.
With ``fork`` set, the kernel is forked by the worker's fork server in that sandbox
(:mod:`grader.kernel_forks`) instead of started on its own, where a server can be had.
"""
from __future__ import annotations

import subprocess
import typing as t
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from . import kernel_forks
from .sandbox import Sandbox, interrupt


class SandboxedKernelManager(AsyncKernelManager):
    """``AsyncKernelManager`` whose kernel command runs through ``sandbox.wrap`` (None: unconfined)."""

    sandbox: Sandbox | None = None
    fork: bool = False                              # fork the kernel from the sandbox's fork server
    server: kernel_forks.ForkServer | None = None   # the server that forked it, if one did

    async def _async_pre_start_kernel(self, **kw: t.Any):
        self.server = kernel_forks.server_for(self.sandbox) if self.sandbox is not None and self.fork else None
        if self.sandbox is not None:
            self.transport = "ipc"
            self.ip = str(self.sandbox.scratch / "kernel")
            self.connection_file = str(self.sandbox.scratch / "kernel.json")
            kw["cwd"] = str(self.sandbox.scratch)
            # what the kernel writes to its own stdout/stderr (not a cell's output) is no one's business
            kw["stdout"] = kw["stderr"] = subprocess.DEVNULL
        return await super()._async_pre_start_kernel(**kw)

    def write_connection_file(self, **kwargs: t.Any) -> None:
        super().write_connection_file(**kwargs)
        if self.sandbox is not None:
            self.sandbox.give(Path(self.connection_file))

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = super().format_kernel_cmd(extra_arguments)
        return self.sandbox.wrap(command) if self.sandbox is not None and self.server is None else command

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: t.Any) -> None:
        if self.server is None:
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        provisioner = self.provisioner
        try:
            provisioner.process = self.server.fork(kernel_cmd)
        except OSError:             # the server is gone (killed from outside): this kernel starts on its own
            kernel_forks.stop()
            self.server = None
            return await super()._async_launch_kernel(self.sandbox.wrap(kernel_cmd), **kw)
        provisioner.pid, provisioner.pgid, provisioner.cwd = provisioner.process.pid, None, kw.get("cwd")
        self._reconcile_connection_info(provisioner.connection_info)

    async def _async_interrupt_kernel(self) -> None:
        if self.sandbox is None or not self.has_kernel:
            return await super()._async_interrupt_kernel()
        interrupt(self.provisioner.pid, itself=self.server is not None)

    interrupt_kernel = _async_interrupt_kernel   # the base class binds the name to its own method
