"""Capture: run the program once, eagerly, and record every torch call it makes into a Graph.

Why a `TorchFunctionMode`: it sees each call at the level the program wrote it (``F.linear``,
``x.softmax(-1)``, ``x + 1``), including methods, operators and factory functions, before
autograd or decomposition; the recorded graph reads like the source and like fx's. (A
`TorchDispatchMode` would see ATen ops after autograd: more ops, further from the code.)
Values are identified by tensor identity: each tensor the program produces maps to the node
that produced it; inputs map to placeholders, module parameters/buffers to param nodes. Every
call goes to ``builder.GraphBuilder`` (the same builder the fx front-end uses), which records it,
turns an in-place update of an intermediate into its functional form, and records views.

Capture never guesses. When the recording could not be replayed faithfully (the program reads a
tensor value into Python, draws random numbers, mutates an input or a parameter, passes tensors to
a torch call inside a container ``tensorcraft.trees`` cannot look into...), the call still finishes
eagerly and `Captured.reason` says why, with the source line. It also records which Python functions
the call ran through (``Captured.ran``), so that the guards watch the globals and closure cells those
read, not only the compiled function's own (``guards.values``).
"""
from __future__ import annotations

import functools
import inspect
import os
import sys
import types
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from .. import trees
from . import opnames
from ..stages import swappable
from .builder import PLAIN_RESULTS, GraphBuilder, Refused
from .ir import Graph, Node



@dataclass
class Captured:
    """The outcome of one capturing call: a graph, or the reason there is none."""
    graph: Graph | None
    reason: str | None
    result: Any  # what the eager call returned (the first call's answer)
    constants: list[torch.Tensor] = field(default_factory=list)  # tensors baked in by reference
    input_names: list[str] = field(default_factory=list)  # a readable name per flat input
    ran: list[tuple[types.CodeType, dict]] = field(default_factory=list)  # (code, globals) of each Python
    # function the call went through: the guards watch the globals and closure cells they read


@swappable
def capture(fn: Callable, args: tuple = (), kwargs: dict | None = None,
            module: torch.nn.Module | None = None) -> Captured:
    """Call ``fn(*args, **kwargs)`` eagerly and record the torch calls it makes.

    ``module``: whose parameters, buffers and plain tensor attributes become `param` nodes,
    read again at every call (by qualified name) instead of being baked in.
    """
    kwargs = kwargs or {}
    flat, spec = trees.flatten((args, kwargs))
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
            recorder.bind(value, recorder.builder.placeholder(value, name, index))
    with recorder, _FunctionsRun() as ran:
        result = fn(*args, **kwargs)
    if recorder.reason is not None:
        return Captured(None, recorder.reason, result, input_names=names)
    out_flat, out_spec = trees.flatten(result)
    outputs = []
    for value in out_flat:
        if isinstance(value, torch.Tensor):
            outputs.append(recorder.node_for(value))
        elif isinstance(value, PLAIN_RESULTS):
            outputs.append(value)
        else:
            return Captured(None, f"unsupported output: the function returned a {type(value).__name__}", result,
                            input_names=names)
    if recorder.reason is not None:  # an output can be refused too (a global that requires grad)
        return Captured(None, recorder.reason, result, input_names=names)
    recorder.builder.output(outputs, out_spec)
    return Captured(recorder.graph, None, result, recorder.constants, names, list(ran.items()))


class _FunctionsRun(dict):
    """code -> globals of every Python function called while it is active (``sys.setprofile``: the call
    events only, this thread), for the guards on the Python values those functions read."""

    def __enter__(self) -> "_FunctionsRun":
        self._previous = sys.getprofile()
        sys.setprofile(self._event)
        return self

    def _event(self, frame, event, arg) -> None:
        if event == "call" and frame.f_code not in self:
            self[frame.f_code] = frame.f_globals
        if self._previous is not None:
            self._previous(frame, event, arg)

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._previous)


def _holds_state(value: Any) -> bool:
    """An argument whose contents a graph would bake in but a guard cannot watch (functions and
    classes are fine: guarded by identity, their code does not change)."""
    if isinstance(value, torch.nn.Module):
        return True
    return not isinstance(value, PLAIN_RESULTS + (type, types.FunctionType, types.BuiltinFunctionType,
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
        leaves = trees.leaves(value)
        if isinstance(value, torch.Tensor) or len(leaves) == 1 and leaves[0] is value:
            names.append(pname)
        elif isinstance(value, (tuple, list)) and inspect.signature(fn).parameters[pname].kind \
                is inspect.Parameter.VAR_POSITIONAL:
            for j, v in enumerate(value):
                sub = trees.leaves(v)
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


class _Recorder(TorchFunctionMode):
    """Maps each tensor the program touches to its node and hands every call to the graph builder;
    stops recording (not running) at the first refusal."""

    def __init__(self, module: torch.nn.Module | None) -> None:
        super().__init__()
        self.builder = GraphBuilder()
        self.graph = self.builder.graph
        self.nodes: dict[int, Node] = {}  # id(tensor) -> its node (the builder keeps the tensors alive)
        self.module_names = _module_tensors(module)
        self.constants: list[torch.Tensor] = []
        self.reason: str | None = None

    def bind(self, tensor: torch.Tensor, node: Node) -> None:
        self.nodes[id(tensor)] = node

    def node_for(self, tensor: torch.Tensor) -> Node:
        node = self.nodes.get(id(tensor))
        if node is not None:
            return node
        qual = self.module_names.get(id(tensor))
        if qual is not None:
            node = self.builder.param(tensor, qual)
        else:  # a tensor from a global or a closure: baked in by reference (version-guarded)
            if tensor.requires_grad and torch.is_grad_enabled():
                self.refuse(f"a tensor{list(tensor.shape)} from a closure or a global requires grad: "
                            "its gradient would be lost; pass it as an argument or make it a module parameter")
            node = self.builder.constant(tensor)
            self.constants.append(tensor)
        self.bind(tensor, node)
        return node

    def refuse(self, reason: str) -> None:
        if self.reason is None:
            self.reason = f"{reason} (at {_user_location()})"

    def _to_node(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self.node_for(value)
        if trees.unmappable(value):  # its tensors would be recorded as constants: baked, not read
            raise Refused(f"a {type(value).__name__} passed to a torch call is a container capture cannot "
                          "look into (not a tuple, list, dict, namedtuple or dataclass pytree knows); "
                          "pass a tuple or a list")
        return value

    def _to_nodes(self, value: Any) -> Any:
        return trees.map_leaves(self._to_node, value)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # what runs from here on is the recording (the builder, substituted stages), not the program:
        # _FunctionsRun does not watch it
        profile = sys.getprofile()
        sys.setprofile(None)
        try:
            return self._record(func, types, args, kwargs)
        finally:
            sys.setprofile(profile)

    def _record(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.reason is not None:  # already refused: just finish the call eagerly
            return func(*args, **kwargs)
        name = opnames.canonical_name(func)
        if name == "__iter__":  # iterating a tensor unbinds it along dim 0: record that
            return iter(self.__torch_function__(torch.unbind, types, (args[0],), {}))
        try:
            node_args, node_kwargs = self._to_nodes(tuple(args)), self._to_nodes(kwargs)
            recorded = self.builder.call(func, node_args, node_kwargs, tuple(args), kwargs, op=name)
        except Refused as refusal:
            self.refuse(str(refusal))
            return refusal.result if refusal.ran else func(*args, **kwargs)
        for tensor, node in recorded.produced():
            self.bind(tensor, node)
        if recorded.updated is not None:  # the updated tensor is the functional form's value now
            self.bind(args[0], recorded.updated)
        return recorded.value
