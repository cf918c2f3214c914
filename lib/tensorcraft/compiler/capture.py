"""Capture: run the program once, eagerly, and record every torch call it makes into a Graph.

Why a `TorchFunctionMode`: it sees each call at the level the program wrote it (``F.linear``,
``x.softmax(-1)``, ``x + 1``), including methods, operators and factory functions, before
autograd or decomposition; the recorded graph reads like the source and like fx's. (A
`TorchDispatchMode` would see ATen ops after autograd: more ops, further from the code.)
Values are identified by tensor identity: each tensor the program produces maps to the node
that produced it; inputs map to placeholders, module parameters/buffers to param nodes.

Capture never guesses. When the recording could not be replayed faithfully (the program reads a
tensor value into Python, draws random numbers, mutates an input or a parameter...), the call
still finishes eagerly and `Captured.reason` says why, with the source line.
"""
from __future__ import annotations

import functools
import inspect
import operator
import types
import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from . import functional, opnames
from .ir import Graph, Node

_RESULT_TYPES = (torch.Tensor, int, float, bool, complex, str, type(None), torch.Size, torch.dtype,
                 torch.device, torch.memory_format, torch.layout)


@dataclass
class Captured:
    """The outcome of one capturing call: a graph, or the reason there is none."""
    graph: Graph | None
    reason: str | None
    result: Any  # what the eager call returned (the first call's answer)
    constants: list[torch.Tensor] = field(default_factory=list)  # tensors baked in by reference
    input_names: list[str] = field(default_factory=list)  # a readable name per flat input


def capture(fn: Callable, args: tuple = (), kwargs: dict | None = None,
            module: torch.nn.Module | None = None) -> Captured:
    """Call ``fn(*args, **kwargs)`` eagerly and record the torch calls it makes.

    ``module``: whose parameters, buffers and plain tensor attributes become `param` nodes,
    read again at every call (by qualified name) instead of being baked in.
    """
    kwargs = kwargs or {}
    flat, spec = pytree.tree_flatten((args, kwargs))
    recorder = _Recorder(module)
    names = _input_names(module.forward if module is not None else fn, args, kwargs, flat)
    for value, name in zip(flat, names):
        if _holds_state(value):  # an array, a module, an object with tensor attributes
            result = fn(*args, **kwargs)
            return Captured(None, f"argument {name} is a {type(value).__name__}: what it holds could change "
                            "between calls without the guards seeing; pass tensors and plain values "
                            "(numbers, strings, None) instead", result, input_names=names)
    for index, (value, name) in enumerate(zip(flat, names)):
        if isinstance(value, torch.Tensor):
            node = recorder.graph.add_like(value, "placeholder", "placeholder", name=name,
                                           attrs={"index": index})
            recorder.bind(value, node)
            recorder.protected.add(id(value))
    with recorder:
        result = fn(*args, **kwargs)
    if recorder.reason is not None:
        return Captured(None, recorder.reason, result, input_names=names)
    out_flat, out_spec = pytree.tree_flatten(result)
    outputs = []
    for value in out_flat:
        if isinstance(value, torch.Tensor):
            outputs.append(recorder.node_for(value))
        elif isinstance(value, _RESULT_TYPES):
            outputs.append(value)
        else:
            return Captured(None, f"unsupported output: the function returned a {type(value).__name__}", result,
                            input_names=names)
    if recorder.reason is not None:  # an output can be refused too (a global that requires grad)
        return Captured(None, recorder.reason, result, input_names=names)
    graph = recorder.graph
    graph.add("output", "output", args=tuple(outputs))
    graph.output_spec = out_spec
    return Captured(graph, None, result, recorder.constants, names)


def _holds_state(value: Any) -> bool:
    """An argument whose contents a graph would bake in but a guard cannot watch (functions and
    classes are fine: guarded by identity, their code does not change)."""
    if isinstance(value, torch.nn.Module):
        return True
    return not isinstance(value, _RESULT_TYPES + (type, types.FunctionType, types.BuiltinFunctionType,
                                                  types.MethodType, functools.partial)) \
        and not type(value).__module__.startswith("torch")  # torch's own values: Size, finfo, ...


def _input_names(fn: Callable, args: tuple, kwargs: dict, flat: list) -> list[str]:
    """Readable placeholder names: the function's own parameter names where possible."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return [f"arg{i}" for i in range(len(flat))]
    names: list[str] = []
    for pname, value in bound.arguments.items():
        leaves = pytree.tree_leaves(value)
        if isinstance(value, torch.Tensor) or len(leaves) == 1 and leaves[0] is value:
            names.append(pname)
        elif isinstance(value, (tuple, list)) and inspect.signature(fn).parameters[pname].kind \
                is inspect.Parameter.VAR_POSITIONAL:
            for j, v in enumerate(value):
                sub = pytree.tree_leaves(v)
                names += [f"{pname}{j}"] if len(sub) == 1 else [f"{pname}{j}_{k}" for k in range(len(sub))]
        else:
            names += [f"{pname}_{k}" for k in range(len(leaves))]
    return names if len(names) == len(flat) else [f"arg{i}" for i in range(len(flat))]


def _module_tensors(module: torch.nn.Module | None) -> dict[int, str]:
    """id(tensor) -> qualified name, for parameters, buffers and plain tensor attributes."""
    if module is None:
        return {}
    names: dict[int, str] = {}
    for qual, sub in module.named_modules(remove_duplicate=False):
        prefix = f"{qual}." if qual else ""
        for attr, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not attr.startswith("_"):
                names.setdefault(id(value), prefix + attr)
    for qual, t in module.named_buffers(remove_duplicate=False):
        names.setdefault(id(t), qual)
    for qual, t in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(t), qual)
    return names


def _user_location() -> str:
    """file:line of the innermost frame outside torch and this package: where the user's code is."""
    here = os.path.dirname(os.path.abspath(__file__))
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    for frame in reversed(traceback.extract_stack()):
        path = os.path.abspath(frame.filename)
        if not path.startswith(here) and not path.startswith(torch_dir):
            return f"{os.path.basename(frame.filename)}:{frame.lineno} `{(frame.line or '').strip()}`"
    return "<unknown>"


def _result_dtype(fn: Callable, args: tuple, kwargs: dict) -> torch.dtype | None:
    """The dtype ``fn(*args, **kwargs)`` would return, found on meta tensors (no data, no compute)."""
    def to_meta(v):
        return v.to("meta") if isinstance(v, torch.Tensor) else v
    try:
        out = fn(*pytree.tree_map(to_meta, args), **pytree.tree_map(to_meta, kwargs))
    except Exception:  # noqa: BLE001  (an op without a meta kernel: cannot tell)
        return None
    return out.dtype if isinstance(out, torch.Tensor) else None


class _Recorder(TorchFunctionMode):
    """Records each torch call made while active; stops recording (not running) at the first refusal."""

    def __init__(self, module: torch.nn.Module | None) -> None:
        super().__init__()
        self.graph = Graph()
        self.values: dict[int, Node] = {}
        self.keep: list[torch.Tensor] = []  # keeps tensors alive so ids are not reused
        self.protected: set[int] = set()  # ids of inputs and module tensors: never mutated
        self.module_names = _module_tensors(module)
        self.protected |= set(self.module_names)
        self.constants: list[torch.Tensor] = []
        self.reason: str | None = None

    def bind(self, tensor: torch.Tensor, node: Node) -> None:
        self.values[id(tensor)] = node
        self.keep.append(tensor)

    def node_for(self, tensor: torch.Tensor) -> Node:
        node = self.values.get(id(tensor))
        if node is not None:
            return node
        qual = self.module_names.get(id(tensor))
        if qual is not None:
            node = self.graph.add_like(tensor, "param", "param", qual, name=qual, attrs={"value": tensor})
        else:  # a tensor from a global or a closure: baked in by reference (version-guarded)
            if tensor.requires_grad and torch.is_grad_enabled():
                self.refuse(f"a tensor{list(tensor.shape)} from a closure or a global requires grad: "
                            "its gradient would be lost; pass it as an argument or make it a module parameter")
            node = self.graph.add_like(tensor, "constant", "constant", tensor, name="const")
            self.constants.append(tensor)
        self.bind(tensor, node)
        return node

    def refuse(self, reason: str) -> None:
        if self.reason is None:
            self.reason = f"{reason} (at {_user_location()})"

    def _to_nodes(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self.node_for(value)
        if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
            return type(value)(self._to_nodes(v) for v in value)
        if isinstance(value, dict):
            return {k: self._to_nodes(v) for k, v in value.items()}
        if isinstance(value, slice):
            return slice(self._to_nodes(value.start), self._to_nodes(value.stop), self._to_nodes(value.step))
        return value

    def _is_protected(self, tensor: torch.Tensor) -> bool:
        t: torch.Tensor | None = tensor
        while t is not None:
            if id(t) in self.protected:
                return True
            t = t._base
        return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.reason is not None:  # already refused: just finish the call eagerly
            return func(*args, **kwargs)
        name = opnames.canonical_name(func)
        why = opnames.refusal(name, args, kwargs)
        if why is None and kwargs.get("out") is not None:
            why = f"out= argument: {name} writes into an existing tensor"
        if why is not None:
            self.refuse(why)
            return func(*args, **kwargs)
        if name == "__iter__":  # iterating a tensor unbinds it along dim 0: record that
            return iter(self.__torch_function__(torch.unbind, types, (args[0],), {}))
        inplace = opnames.is_inplace_name(name) or kwargs.get("inplace") is True
        if inplace:
            return self._record_inplace(func, name, args, kwargs)
        node_args, node_kwargs = self._to_nodes(tuple(args)), self._to_nodes(kwargs)
        result = func(*args, **kwargs)
        self._record(func, name, node_args, node_kwargs, args, kwargs, result)
        return result

    def _record(self, func, name, node_args, node_kwargs, args, kwargs, result) -> None:
        leaves = pytree.tree_leaves(result) if isinstance(result, (tuple, list)) else [result]
        if not any(isinstance(v, torch.Tensor) for v in leaves):
            if not all(isinstance(v, _RESULT_TYPES) for v in leaves):
                self.refuse(f"unsupported result: {name} returned a {type(result).__name__}")
            return  # shapes, sizes, dtypes: plain values, baked in (the guards pin the shapes)
        graph = self.graph
        if isinstance(result, torch.Tensor):
            node = graph.add_like(result, "call", name, func, node_args, node_kwargs, name=name)
            node.attrs["aliases"] = self._alias_of(result, args, kwargs)
            self.bind(result, node)
            return
        if not isinstance(result, (tuple, list)) or not all(isinstance(v, _RESULT_TYPES) for v in result):
            self.refuse(f"unsupported result: {name} returned a nested {type(result).__name__}")
            return
        multi = graph.add("call", name, func, node_args, node_kwargs, name=name)
        for i, value in enumerate(result):
            if isinstance(value, torch.Tensor):
                item = graph.add_like(value, "call", "getitem", operator.getitem, (multi, i), name=f"{multi.name}_{i}")
                item.attrs["aliases"] = self._alias_of(value, args, kwargs)
                self.bind(value, item)

    def _alias_of(self, result: torch.Tensor, args, kwargs) -> str | None:
        """Name of the input node whose memory the result shares (a view), else None."""
        if result.device.type == "meta" or result.untyped_storage().nbytes() == 0:
            return None
        ptr = result.untyped_storage().data_ptr()
        for value in pytree.tree_leaves((args, kwargs)):
            if isinstance(value, torch.Tensor) and value.device == result.device \
                    and value.untyped_storage().nbytes() and value.untyped_storage().data_ptr() == ptr:
                return self.values[id(value)].name if id(value) in self.values else None
        return None

    def _record_inplace(self, func, name, args, kwargs):
        """Record ``x.op_(...)`` on an intermediate as ``x2 = op(x, ...)``; refuse it on anything shared."""
        target = args[0]
        if self._is_protected(target):
            self.refuse(f"in-place update of an input or parameter: {name}")
            return func(*args, **kwargs)
        if target._is_view() or any(t._base is target for t in self.keep):
            self.refuse(f"in-place update of a tensor that shares memory with a view: {name}")
            return func(*args, **kwargs)
        if name == "setitem_":
            pure, pure_kwargs = functional.index_put, {}
        elif kwargs.get("inplace") is True:
            pure, pure_kwargs = func, {**kwargs, "inplace": False}
        else:
            pure, pure_kwargs = getattr(torch.Tensor, name[:-1], None), kwargs
            if pure is None or not callable(pure):  # zero_, fill_, copy_, requires_grad_ ...
                self.refuse(f"in-place op {name} has no functional form")
                return func(*args, **kwargs)
        if name != "setitem_":
            promoted = _result_dtype(pure, args, pure_kwargs)
            if promoted != target.dtype:  # x.add_(y64) stays float32; add(x, y64) would be float64
                self.refuse(f"in-place op {name} on a {target.dtype} tensor computes in {promoted}: "
                            "its functional form would change the dtype")
                return func(*args, **kwargs)
        node_args, node_kwargs = self._to_nodes(tuple(args)), self._to_nodes(pure_kwargs)
        result = func(*args, **kwargs)
        op = "index_put" if name == "setitem_" else name.rstrip("_")
        node = self.graph.add_like(target, "call", op, pure, node_args, node_kwargs, name=op)
        self.bind(target, node)
        return result
