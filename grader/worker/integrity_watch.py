"""The grader's side of ``grader.kernel.integrity``: fingerprint the grading code in the kernel before the
first cell runs, verify it after every cell, and score 0 every graded cell from the cell that
changed it on, saying so in the cell's output (and so in the feedback).

The questions are ``user_expressions`` entries, not notebook cells: they leave no trace in the
notebook, and a fresh nonce per question means that an answer cannot be replayed from an earlier one.
A cell's verification rides on the cell's own execute request (:meth:`IntegrityWatch.sending`),
which the kernel answers right after the cell's code, in the same reply: one round trip a cell
fewer (20–30 verified cells a notebook). ipykernel evaluates them only after a cell that ran
without error; after any other, the question is asked on its own, as a silent execution.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import secrets
from queue import Empty
from time import monotonic

import nbformat
from jupyter_core.utils import ensure_async, run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.utils import is_grade

ANSWER_TIMEOUT = 30.0     # seconds the kernel has to answer (it imports torch on the first question)
MODIFIED = "GradingCodeModified"


def check_module(assignment: str) -> str | None:
    """``grader.checks.nb00_welcome`` for ``00_welcome``, when that module exists."""
    name = f"grader.checks.nb{assignment}"
    return name if importlib.util.find_spec(name) is not None else None


class IntegrityWatch:
    """Asks one kernel (through ``client``, a jupyter AsyncKernelClient) about its grading code."""

    def __init__(self, client, module: str | None):
        self.client, self.module = client, module
        self.installed = False
        self.digest = ""                     # the fingerprint's digest, as install() gave it
        self.modified: str | None = None     # "the grading code was modified at cell N (...)"
        self.problem: str | None = None      # why no fingerprint could be taken (no cell is zeroed)
        self.unverified: list[int] = []      # code cells run since the last verification, not verified
        self._nonce: str | None = None       # the nonce of the verification sent with the cell being run

    def before_first_cell(self) -> None:
        answer = self._ask(f"__import__('grader.kernel.integrity', fromlist=['install']).install({self.module!r})")
        try:
            _, self.digest = ast.literal_eval(answer or "")
            self.installed = True
        except (ValueError, SyntaxError, TypeError):
            self.installed = False
        if not self.installed:
            self.problem = "the grading code could not be fingerprinted in this kernel; it was not verified"

    def _verifies(self, cell: NotebookNode, last: bool) -> bool:
        """Whether ``cell`` is verified after it ran: learner code may have run in it (a graded cell, a
        cell the learner may edit or add), or it is the last; not once a change was found."""
        return self.installed and self.modified is None and (last or _learner_code_may_run(cell))

    @contextlib.contextmanager
    def sending(self, cell: NotebookNode, last: bool = False):
        """While ``cell`` is sent to the kernel, its execute request carries the verification (when
        the cell is verified): ``after_cell`` reads the answer from the cell's reply."""
        self._nonce = secrets.token_hex(8) if self._verifies(cell, last) else None
        if self._nonce is None:
            yield
            return
        self.client.execute = functools.partial(type(self.client).execute, self.client,
                                                user_expressions={"answer": _verify_call(self._nonce)})
        try:
            yield
        finally:
            del self.client.execute             # the client's own method again

    def after_cell(self, cell: NotebookNode, index: int, last: bool = False, reply: dict | None = None) -> None:
        """Verify after ``cell`` ran, if it is verified (:meth:`_verifies`), from the answer in its
        execute ``reply`` (sent with it, :meth:`sending`) or else asked now; from the first change on,
        every graded cell scores 0."""
        if self._verifies(cell, last):
            nonce, answer = self._nonce, _answer((reply or {}).get("content", {})) if self._nonce else None
            if answer is None:      # the cell raised (nothing was evaluated), was interrupted, or sent none
                nonce = secrets.token_hex(8)
                answer = self._ask(_verify_call(nonce))
            changed = _parse(answer, nonce, self.digest)
            if changed:
                where = f"at cell {index + 1}"
                if self.unverified:
                    where += f" (or in instructor cell{'s' * (len(self.unverified) > 1)} "
                    where += f"{', '.join(str(i + 1) for i in self.unverified)} before it, which called learner code)"
                self.modified = f"the grading code was modified {where} ({', '.join(changed)})"
            self.unverified = []
        elif self.installed and self.modified is None:
            self.unverified.append(index)
        if self.modified and is_grade(cell):
            cell.outputs.append(nbformat.v4.new_output(
                "error", ename=MODIFIED, evalue=f"{self.modified}; this cell scores 0",
                traceback=[f"\x1b[0;31m{MODIFIED}\x1b[0m: {self.modified}; this cell scores 0"]))

    def _ask(self, expression: str) -> str | None:
        """The repr of ``expression`` evaluated silently in the kernel, or None if it failed."""
        return run_sync(self._async_ask)(expression)

    async def _async_ask(self, expression: str) -> str | None:
        msg_id = self.client.execute("", silent=True, store_history=False, user_expressions={"answer": expression})
        deadline = monotonic() + ANSWER_TIMEOUT
        try:
            while True:
                msg = await ensure_async(self.client.shell_channel.get_msg(timeout=max(0.1, deadline - monotonic())))
                if msg["parent_header"].get("msg_id") == msg_id:
                    break
        except Empty:
            return None
        return _answer(msg["content"])


def _verify_call(nonce: str) -> str:
    return f"__import__('grader.kernel.integrity', fromlist=['verify']).verify({nonce!r})"


def _answer(reply_content: dict) -> str | None:
    """The repr of the ``answer`` expression in an execute reply, None where it was not evaluated or failed."""
    answer = reply_content.get("user_expressions", {}).get("answer", {})
    return answer.get("data", {}).get("text/plain") if answer.get("status") == "ok" else None


def _learner_code_may_run(cell: NotebookNode) -> bool:
    """Instructor cells (locked, not graded) are restored before grading; every other cell runs
    learner code: solution cells, cells the learner added, test cells (they call the learner's code)."""
    nbgrader = cell.metadata.get("nbgrader", {})
    return bool(nbgrader.get("grade") or nbgrader.get("solution") or not nbgrader.get("locked"))


def _parse(answer: str | None, nonce: str, digest: str) -> list[str]:
    """The changed names in a verify() answer; an answer that is missing or malformed, carries
    another nonce, or compares with another fingerprint than the first, counts as a change."""
    try:
        echoed, compared_with, changed = ast.literal_eval(answer or "")
    except (ValueError, SyntaxError, TypeError):
        return ["the kernel did not answer the grader's verification"]
    if echoed != nonce or not isinstance(changed, list):
        return ["the kernel gave a forged answer to the grader's verification"]
    if compared_with != digest:
        return ["the fingerprint taken before the first cell was replaced"]
    return [str(name) for name in changed]
