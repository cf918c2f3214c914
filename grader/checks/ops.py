"""Tripwires at the level of the operation: forbidden functionality caught however it is reached.

Name tripwires (``tripwire.py``) replace ``torch.outer`` by a function that fails; they cannot see
``torch.ops.aten.outer``, ``torch._C._VariableFunctions.outer``, ``a.outer(b)`` kept as a bound
method, or ``torch.outer`` stored in a dict before the check ran. Every one of those routes still
goes through PyTorch's ``__torch_function__`` handling, so while a learner's function runs
:func:`forbidden_ops` installs a :class:`~torch.overrides.TorchFunctionMode` that sees each call by
its operation's name, whatever name the learner used; and, when a forbidden operation has a kernel
of its own (``aten.mm``), a :class:`~torch.utils._python_dispatch.TorchDispatchMode` that sees each
aten operation actually dispatched, however it was reached — even from inside another function. An exercise that forbids numpy also fails a tensor
converted to a numpy array (``np.outer(a, b)``, ``a.numpy()``) or a numpy array turned into a tensor.

Switching the watch off (``torch._C.DisableTorchFunction``) is itself a name tripwire while it runs.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .tripwire import ForbiddenCallError, tripwires

# Leaving the watch: forbidden by name while it runs (torch's own code uses them only in torch.compile).
MODE_SWITCHES = ("torch._C.DisableTorchFunction", "torch._C._DisableTorchDispatch")
NUMPY_HINT = "numpy is not allowed in this exercise: stay with torch tensors and torch operations (no .numpy(), no np.*)"
NUMPY_CONVERSIONS = frozenset({"__array__", "numpy", "from_numpy", "__array_wrap__"})


def op_name(func: Any) -> str:
    """``outer`` for torch.outer, Tensor.outer, torch.ops.aten.outer(.default), _VariableFunctions.outer."""
    name = getattr(func, "__name__", "") or ""
    return name.split(".")[0]


class _Watch:
    def __init__(self, ops: frozenset[str], numpy_allowed: bool, exercise: str):
        self.ops, self.numpy_allowed, self.exercise = ops, numpy_allowed, exercise

    def judge(self, func: Any, args: tuple, kwargs: dict | None) -> None:
        name = op_name(func)
        if name in self.ops:
            raise ForbiddenCallError(
                f"your code called the operation '{name}' (as {_shown(func)}), which the exercise "
                f"'{self.exercise}' asks you to do without, under any name; write it with the operations "
                "the exercise names instead")
        if not self.numpy_allowed and (name in NUMPY_CONVERSIONS or _holds_array(args, kwargs)):
            raise ForbiddenCallError(
                f"your code moved data between torch and numpy ({_shown(func)}); the exercise "
                f"'{self.exercise}' is about torch operations: numpy is not allowed, stay with tensors",
                hint=NUMPY_HINT)


class _FunctionWatch(TorchFunctionMode):
    def __init__(self, watch: _Watch):
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.watch.judge(func, args, kwargs)
        return func(*args, **(kwargs or {}))


class _DispatchWatch(TorchDispatchMode):
    def __init__(self, watch: _Watch):
        super().__init__()
        self.watch = watch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.watch.judge(func.overloadpacket, args, kwargs)
        return func(*args, **(kwargs or {}))


def dispatch_watch_needed(ops: tuple[str, ...] | list[str]) -> bool:
    """Whether any of ``ops`` is an aten operation with a kernel of its own (``mm``, ``sum``), which
    only the dispatch watch sees when reached from inside another function. Composite operations
    (``outer``, ``einsum``) are decomposed before dispatch and are seen by the function watch; and
    the dispatch watch costs an import of torch._dynamo in the kernel, so it is used only when needed."""
    return any(hasattr(torch.ops.aten, name) and not torch._C._dispatch_has_kernel_for_dispatch_key(
        f"aten::{name}", "CompositeImplicitAutograd") for name in ops)


@contextlib.contextmanager
def forbidden_ops(ops: tuple[str, ...] | list[str], numpy_allowed: bool = True,
                  exercise: str = "this exercise") -> Iterator[None]:
    """While the block runs, calling any operation named in ``ops`` (``"outer"``, ``"einsum"``,
    ``"mm"``) by any route raises :class:`ForbiddenCallError`; so does numpy, unless allowed."""
    if not ops and numpy_allowed:
        yield
        return
    watch = _Watch(frozenset(ops), numpy_allowed, exercise)
    depth = torch._C._len_torch_function_stack()
    dispatch = _DispatchWatch(watch) if dispatch_watch_needed(ops) else contextlib.nullcontext()
    with tripwires(MODE_SWITCHES, exercise), _FunctionWatch(watch), dispatch:
        yield
        if torch._C._len_torch_function_stack() != depth + 1:
            raise ForbiddenCallError(f"your code removed the check's watch over the operations it calls "
                                     f"(exercise '{exercise}'); leave PyTorch's mode stack alone")


def _holds_array(args: tuple, kwargs: dict | None) -> bool:
    return any(isinstance(a, np.ndarray) for a in (*args, *(kwargs or {}).values()))


def _shown(func: Any) -> str:
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return f"torch.ops.{func}"
    qualified = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    module = getattr(func, "__module__", None)
    return f"{module}.{qualified}" if module and not qualified.startswith(module) else str(qualified)
