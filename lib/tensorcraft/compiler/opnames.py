"""Canonical op names: one name per operation, whatever way the program spelled it.

`x + y`, `x.add(y)`, `torch.add(x, y)` and fx's `operator.add` are all "add"; `2 - x` (which
torch records as ``Tensor.__rsub__(x, 2)``) is "rsub". Passes match on these names, and the
fx cross-check compares sequences of them. Also: which calls capture must refuse, and why.
"""
from __future__ import annotations

import operator
from typing import Any

import torch

from ..stages import swappable

# Python operators and dunders -> canonical name
_DUNDER = {
    "__add__": "add", "__radd__": "radd", "__iadd__": "add_",
    "__sub__": "sub", "__rsub__": "rsub", "__isub__": "sub_",
    "__mul__": "mul", "__rmul__": "rmul", "__imul__": "mul_",
    "__truediv__": "div", "__rtruediv__": "rdiv", "__itruediv__": "div_",
    "__matmul__": "matmul", "__rmatmul__": "rmatmul",
    "__pow__": "pow", "__rpow__": "rpow", "__ipow__": "pow_",
    "__neg__": "neg", "__abs__": "abs", "__getitem__": "getitem", "__setitem__": "setitem_",
    "__gt__": "gt", "__lt__": "lt", "__ge__": "ge", "__le__": "le", "__eq__": "eq", "__ne__": "ne",
    "__and__": "bitwise_and", "__or__": "bitwise_or", "__invert__": "bitwise_not",
    "__floordiv__": "floor_divide", "__mod__": "remainder",
}
# Synonyms torch offers for the same operation
_SYNONYMS = {"true_divide": "div", "divide": "div", "multiply": "mul", "subtract": "sub",
             "negative": "neg", "absolute": "abs", "max_elementwise": "maximum", "square": "square",
             "truediv": "div", "concat": "cat", "concatenate": "cat"}


def canonical_name(func: Any) -> str:
    """The canonical op name of a torch callable, a Tensor method or property, or an operator."""
    if isinstance(func, str):  # fx call_method target
        name = func
    elif type(func).__name__ == "method-wrapper" and hasattr(func, "__self__"):
        name = getattr(func.__self__, "__name__", "attr")  # a Tensor property getter: .T, .shape
    else:
        name = getattr(func, "__name__", type(func).__name__)
    if func in (operator.add, operator.sub, operator.mul, operator.truediv, operator.matmul,
                operator.pow, operator.neg, operator.getitem, operator.abs):
        name = f"__{name}__"
    name = _DUNDER.get(name, name)
    return _SYNONYMS.get(name, name)


def is_inplace_name(name: str) -> bool:
    """`add_`, `relu_`, `setitem_`: the op mutates its first argument."""
    return name.endswith("_") and not name.endswith("__")


# Reading tensor data into Python: the program's next steps depend on values capture cannot see.
DATA_DEPENDENT = {"__bool__", "item", "tolist", "__int__", "__float__", "__index__", "__complex__",
                  "numpy", "__array__", "__repr__", "__str__", "__format__", "data_ptr"}
# Output shape depends on the values: a shape baked in at capture would be wrong next time.
DATA_DEPENDENT_SHAPE = {"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere",
                        "bincount", "repeat_interleave", "nonzero_static"}
# Fresh random numbers at every call: replaying a captured graph would repeat or drift.
RANDOM = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm",
          "bernoulli", "multinomial", "normal", "poisson", "uniform_", "normal_", "bernoulli_",
          "exponential_", "geometric_", "cauchy_", "log_normal_", "random_", "rrelu", "native_dropout"}
_DROPOUTS = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}
# With training=True and running statistics, these update the statistics in place.
UPDATES_RUNNING_STATS = {"batch_norm", "instance_norm"}
# Global state changes that a replayed graph would not repeat.
SIDE_EFFECTS = {"_set_grad_enabled", "set_grad_enabled", "manual_seed", "seed", "set_rng_state",
                "_enter_autocast", "_exit_autocast"}


@swappable
def refusal(name: str, args: tuple, kwargs: dict) -> str | None:
    """Why capture must not record this call (None when it can). Reasons are shown by explain()."""
    if name == "data_ptr":
        return ("Tensor.data_ptr reads a memory address, as compiled code calling its kernels does "
                "(is a compiled module or a ctypes call inside the function?): what it does there is invisible to capture")
    if name in DATA_DEPENDENT:
        return f"data-dependent Python: Tensor.{name} reads tensor values into Python (e.g. `if x.sum() > 0`)"
    if name in DATA_DEPENDENT_SHAPE:
        return f"data-dependent shape: {name} returns a shape that depends on the values"
    if name in RANDOM:
        return f"randomness: {name} draws fresh random numbers at every call"
    if name in _DROPOUTS:
        training = kwargs.get("training", args[2] if len(args) > 2 else True)
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
        if training and p > 0:
            return f"randomness: {name} in training mode draws a fresh mask at every call"
    if name in UPDATES_RUNNING_STATS and kwargs.get("training", args[5] if len(args) > 5 else False) \
            and kwargs.get("running_mean", args[1] if len(args) > 1 else None) is not None:
        return f"in-place update of running statistics: {name} in training mode updates its buffers"
    if name in SIDE_EFFECTS:
        return f"global side effect: {name} changes global state inside the function"
    if name == "getitem" and len(args) > 1:
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index):
            return "data-dependent shape: indexing with a boolean mask"
    return None
