"""A kernel client that is ready as soon as the kernel answers, without jupyter_client's fixed wait.

jupyter_client's ``wait_for_ready`` (8.x) ends by draining the IOPub channel until it has been quiet
for 0.2 s: a fixed 0.2 s on every kernel start, about a fifth of the grader's own time per
submission of notebook 00. The drain decides nothing here: nbclient reads IOPub by the id of each
request it sends and skips every other message (the status messages of the readiness request
among them). What stays: the kernel must answer ``kernel_info`` on the shell channel, and a message
must arrive on IOPub (so IOPub is connected before the first cell's output is sent).
"""
from __future__ import annotations

import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_core.utils import ensure_async

IOPUB_CONNECTED_WITHIN = 0.2   # seconds for the readiness request's first IOPub message (else: ask again)


class ReadyClient(AsyncKernelClient):
    """``AsyncKernelClient`` whose ``wait_for_ready`` returns once the kernel has answered."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await ensure_async(self.shell_channel.get_msg(timeout=1))
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                try:
                    await ensure_async(self.iopub_channel.get_msg(timeout=IOPUB_CONNECTED_WITHIN))
                except Empty:
                    pass            # IOPub not connected yet: ask again
                else:
                    self._handle_kernel_info_reply(reply)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")
