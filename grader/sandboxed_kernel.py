"""A Jupyter kernel manager that starts its kernel inside a :class:`~grader.sandbox.Sandbox`.

The sandbox has no network, so the kernel talks over ``ipc`` transport: ZeroMQ on unix sockets in
the scratch folder, which the parent reaches through the same path. The connection file is
written there too, and handed to the sandbox's uid. An interrupt is a SIGINT sent to the processes
inside the sandbox (:func:`~grader.sandbox.interrupt`): one sent to bubblewrap would not reach them.
"""
from __future__ import annotations

import subprocess
import typing as t
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from .sandbox import Sandbox, interrupt


class SandboxedKernelManager(AsyncKernelManager):
    """``AsyncKernelManager`` whose kernel command runs through ``sandbox.wrap`` (None: unconfined)."""

    sandbox: Sandbox | None = None

    async def _async_pre_start_kernel(self, **kw: t.Any):
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
        return self.sandbox.wrap(command) if self.sandbox is not None else command

    async def _async_interrupt_kernel(self) -> None:
        if self.sandbox is None or not self.has_kernel:
            return await super()._async_interrupt_kernel()
        interrupt(self.provisioner.pid)

    interrupt_kernel = _async_interrupt_kernel   # the base class binds the name to its own method
