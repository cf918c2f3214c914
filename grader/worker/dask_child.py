"""The child process beside a Dask worker (``python -m grader.worker.dask_child``): runs the calls
:class:`grader.worker.dask_worker._Child` sends it, one at a time, pickled over its stdin and stdout
(``multiprocessing.connection``), so that a notebook that kills its kernel's parent kills only this."""
from __future__ import annotations

import os
from multiprocessing.connection import Connection


def serve() -> None:
    """The child's loop. Its stdout is the reply channel, so everything else it (or a kernel it
    starts) prints goes to stderr."""
    replies = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    calls = Connection(os.dup(0), writable=False)
    while True:
        try:
            env, fn, args, kwargs = calls.recv()
        except EOFError:
            return
        os.environ.update(env)      # the kernels this child starts inherit it
        try:
            reply = (True, fn(*args, **kwargs))
        except Exception as error:
            reply = (False, error)
        replies.send(reply)


if __name__ == "__main__":
    serve()
