"""Python-value guards: the values a graph depends on besides its arguments, and where each was read.

Capture runs the program once and bakes in every plain Python value it reads (``self.scale``, a
global ``SCALE``, ``cfg.eps``, a closure variable ``k``). Each such value is guarded where it was
read from, by a typed *source* (as Dynamo's ``GlobalSource``, ``AttrSource``, ``NNModuleSource``):

    GlobalSource(namespace, name)   a global of a function the call ran through
    ClosureSource(cell, name)       a closure variable of such a function (the cell itself)
    AttrSource(owner, name)         an attribute in an object's ``__dict__``: a module attribute, a field
                                    of a config object or a dataclass reached through a global, a closure
                                    variable, an argument or another attribute
    HooksSource(namespace, name)    a module's (or torch's global) hook dict: its handle ids
    SubmodulesSource(module)        which submodules a module has (names and ids)

Which values: ``plain_values`` starts from what capture saw run (``ran``: the code objects of every
Python function the call went through, outside torch and this package, with their globals) and from
the compiled module. For each function it guards the globals its code names; for each function
object it can reach (a global, a closure variable, a module attribute, an argument, a method of an
object reached so) the closure cells; for each non-library object reached (a config namespace, a
dataclass, a user module, an instance and its class) the attributes named by the code that ran, to
three levels; for each ``nn.Module`` reached, every attribute of every submodule, its submodules
and its hooks. Plain values are compared by value, other objects by identity (and containers of
objects item by item).

What is refused (``Unguardable``, so the call runs eagerly and explain() says why): a function that
ran and reads closure variables whose cells no guard can reach (a closure obtained at run time, e.g.
returned by another call). Not guarded: builtins, and the state of library code (torch, the
standard library, numpy, einops, tensorcraft's own modules), which the course treats as constant.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

from .inputs import is_plain, same

MISSING = object()
# what every nn.Module keeps in its __dict__ (hook dictionaries, flags): not the model's values. `training`
# stays: `model.dropout.train()` changes a submodule only
_MODULE_BOOKKEEPING = frozenset(vars(torch.nn.Module())) - {"training"}
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_DEPTH = 3  # attribute chains followed: CFG.model.dims.hidden


class Unguardable(Exception):
    """A value the compiled graph depends on that no guard can watch: capture's result must not be reused."""


# ---------------------------------------------------------------- sources: where a value is read from
class Source:
    name: str

    def read(self) -> Any:
        raise NotImplementedError

    def entry(self) -> tuple[dict, Any] | None:
        """(dict, key) when the value is ``dict[key]``: the fast path compares those ids all at once."""
        return None


@dataclass(eq=False)
class DictSource(Source):
    namespace: dict
    key: str
    name: str

    def read(self) -> Any:
        return self.namespace.get(self.key, MISSING)

    def entry(self) -> tuple[dict, Any]:
        return self.namespace, self.key


class GlobalSource(DictSource):
    """``namespace[key]``: a global of a function the call ran through."""


class AttrSource(DictSource):
    """``vars(owner)[key]``: an attribute held in an object's ``__dict__`` (a module's too)."""


@dataclass(eq=False)
class ClosureSource(Source):
    cell: types.CellType
    name: str

    def read(self) -> Any:
        try:
            return self.cell.cell_contents
        except ValueError:
            return MISSING


@dataclass(eq=False)
class HooksSource(Source):
    """The handle ids of the hook dict ``namespace[key]`` (a module's, or torch's global one)."""
    namespace: dict
    key: str
    name: str

    def read(self) -> tuple:
        return tuple(self.namespace.get(self.key, {}).keys())


@dataclass(eq=False)
class SubmodulesSource(Source):
    """(qualified name, id) of every submodule: ``model[1] = nn.Tanh()`` keeps the parameters, not the code."""
    module: torch.nn.Module
    name: str

    def read(self) -> tuple:
        return tuple((qual, id(sub)) for qual, sub in self.module.named_modules())


# ---------------------------------------------------------------- one guarded value
@dataclass
class PlainValue:
    """A Python value the program may read, baked in by capture, and where it is read from."""
    source: Source
    value: Any                   # the value at capture
    by_identity: bool = False    # objects (a tensor, a module, a helper function): the same object, not ==
    items: tuple | None = None   # a container of objects (self.tensors = [t]): what it held, each by identity
    exact: bool = False          # compared with == alone (our own tuples of names and ids: no 2 vs 2.0 to tell)

    def __post_init__(self) -> None:
        if self.by_identity and isinstance(self.value, (list, tuple, dict)):
            self.items = _items(self.value)

    @property
    def name(self) -> str:
        return self.source.name

    def read(self) -> Any:
        return self.source.read()

    def changed(self) -> str | None:
        now = self.read()
        if self.by_identity:
            if now is not self.value:
                return f"{self.name} now refers to another object"
            if self.items is not None and not _same_items(_items(now), self.items):
                return f"{self.name} holds other objects than at capture"
            return None
        equal = now == self.value if self.exact else same(now, self.value)
        return None if equal else f"{self.name} is {now!r}, was {self.value!r}"


def _items(container: Any) -> tuple:
    return tuple(container.items()) if isinstance(container, dict) else tuple(container)


def _same_items(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y or (isinstance(x, tuple) and x[0] == y[0] and x[1] is y[1])
                                    for x, y in zip(a, b))


def _snapshot(value: Any) -> Any:
    """A copy of a plain value that later in-place changes (``self.sizes.append(4)``) do not reach."""
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- which code is the program's own
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))          # tensorcraft/compiler
_PACKAGE = os.path.dirname(_HERE)                                              # tensorcraft
_LIBRARY_DIRS = tuple({os.path.dirname(os.path.abspath(torch.__file__)), _PACKAGE,
                       sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                       sysconfig.get_paths()["platlib"]})
_LIBRARY_PACKAGES = frozenset({"torch", "numpy", "einops", "tensorcraft", "triton", "functorch", "opt_einsum"})
_LIBRARY_ROOTS = frozenset(sys.stdlib_module_names) | _LIBRARY_PACKAGES | {"builtins"}


def is_library_code(code: types.CodeType) -> bool:
    """Code of torch, the standard library, installed packages or tensorcraft itself, or generated by them
    (``<string>``: a dataclass's ``__init__``, a namedtuple's ``__new__``): its state is not guarded."""
    path = code.co_filename
    return path.startswith(("<frozen", "<string>")) or os.path.abspath(path).startswith(_LIBRARY_DIRS)


def _is_library_object(value: Any) -> bool:
    if isinstance(value, types.ModuleType):
        return value.__name__.split(".")[0] in _LIBRARY_ROOTS
    if isinstance(value, type):
        return (value.__module__ or "").split(".")[0] in _LIBRARY_ROOTS
    # instances: those of torch's and the field's own types; a types.SimpleNamespace is the user's data
    return (type(value).__module__ or "").split(".")[0] in _LIBRARY_PACKAGES


def _functions(value: Any) -> list[types.FunctionType]:
    """The Python functions a value calls into: itself, a bound method's function, a partial's."""
    if isinstance(value, types.FunctionType):
        return [value]
    if isinstance(value, types.MethodType):
        return _functions(value.__func__)
    func = getattr(value, "func", None)
    if func is not None and hasattr(value, "args") and hasattr(value, "keywords"):  # functools.partial
        return _functions(func)
    return []


def _opened(value: Any) -> bool:
    """An object whose attributes are guarded one by one (a config namespace, a dataclass, a user module,
    an instance of a user class and the class): not plain, not a tensor, not a module (walked whole)."""
    return hasattr(value, "__dict__") and not isinstance(value, (torch.Tensor, torch.nn.Module, types.FunctionType,
                                                                 types.MethodType, types.BuiltinFunctionType)) \
        and not _functions(value) and not _is_library_object(value) and isinstance(vars(value), dict)


# ---------------------------------------------------------------- finding them
class _Finder:
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names                     # attribute names the code that ran may read
        self.found: list[PlainValue] = []
        self.hooks: list[PlainValue] = []      # listed last: explain() names the first few values
        self.seen_entries: set[tuple[int, Any]] = set()
        self.seen_objects: set[int] = set()
        self.functions: dict[types.CodeType, list[types.FunctionType]] = {}
        self.modules: set[int] = set()

    def add(self, source: Source, value: Any, depth: int = 0) -> None:
        entry = source.entry()
        if entry is not None:
            key = (id(entry[0]), entry[1])
            if key in self.seen_entries:
                return
            self.seen_entries.add(key)
        plain = is_plain(value)
        self.found.append(PlainValue(source, _snapshot(value) if plain else value, by_identity=not plain))
        if not plain:
            self.reach(value, source.name, depth)

    def reach(self, value: Any, label: str, depth: int) -> None:
        """Follow an object: a module's state, a function's closure, an object's attributes."""
        if id(value) in self.seen_objects:
            return
        self.seen_objects.add(id(value))
        if isinstance(value, torch.nn.Module):
            self.module(value, label)
            return
        for func in _functions(value):
            self.function(func, label)
        if isinstance(value, types.MethodType):
            self.reach(value.__self__, f"{label}.__self__", depth)
        if isinstance(value, (list, tuple)) and not is_plain(value):  # a list of helpers, of submodules
            for i, item in enumerate(value):
                self.reach(item, f"{label}[{i}]", depth)
        elif isinstance(value, dict) and not is_plain(value):
            for k, item in value.items():
                self.reach(item, f"{label}[{k!r}]", depth)
        if depth < _DEPTH and _opened(value):
            namespace = vars(value)
            for attr in sorted(self.names & namespace.keys()):
                self.add(AttrSource(namespace, attr, f"{label}.{attr}"), namespace[attr], depth + 1)
            if not isinstance(value, (type, types.ModuleType)) and _opened(type(value)):
                self.reach(type(value), f"type({label})", depth + 1)

    def function(self, func: types.FunctionType, label: str, top: bool = False) -> None:
        self.functions.setdefault(func.__code__, []).append(func)
        for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
            source = ClosureSource(cell, f"closure variable {name}" + ("" if top else f" of {func.__name__}"))
            value = source.read()
            if value is not MISSING:
                self.add(source, value)

    def globals_of(self, code: types.CodeType, namespace: dict) -> None:
        for name in code.co_names:
            if name in namespace:
                self.add(GlobalSource(namespace, name, f"global {name}"), namespace[name])

    def module(self, module: torch.nn.Module, label: str) -> None:
        """A module's own Python state: every attribute of every submodule, its submodules, its hooks."""
        if id(module) in self.modules:
            return
        self.modules.add(id(module))
        self.seen_objects.add(id(module))
        for qual, sub in module.named_modules():
            self.modules.add(id(sub))
            self.seen_objects.add(id(sub))
            where = f"{label} {qual}".rstrip() if label != "module" else f"module {qual or '(top)'}"
            namespace = vars(sub)
            for attr, value in namespace.items():
                if attr in _MODULE_BOOKKEEPING or isinstance(value, torch.Tensor):  # tensors: param nodes
                    continue
                name = f"module attribute {qual + '.' if qual else ''}{attr}" if label == "module" \
                    else f"attribute {attr} of {where}"
                self.add(AttrSource(namespace, attr, name), value)
            for hooks in _HOOKS:  # a hook's torch calls are captured with the module's
                source = HooksSource(namespace, hooks, f"{hooks[1:].replace('_', ' ')} of {where} (handle ids)")
                self.hooks.append(PlainValue(source, source.read()))
        source = SubmodulesSource(module, f"the {label}'s submodules (names and ids)" if label == "module"
                                  else f"the submodules of {label} (names and ids)")
        self.found.append(PlainValue(source, source.read(), exact=True))


def plain_values(fn: Callable, module: Any = None, ran: Sequence[tuple[types.CodeType, dict]] = (),
                 arguments: Iterable[Any] = ()) -> list[PlainValue]:
    """The Python values a capture may have baked in besides the tensors it reads: see the module
    docstring. ``ran``: (code, globals) of each Python function the capturing call went through;
    ``arguments``: the flat non-tensor arguments (a function passed in: its closure is guarded).
    Raises ``Unguardable`` when a function that ran reads closure cells no guard can reach."""
    top = getattr(module.forward if module is not None else fn, "__func__", module.forward if module is not None
                  else fn)
    codes = [(code, namespace) for code, namespace in ran if not is_library_code(code)]
    top_code, top_globals = getattr(top, "__code__", None), getattr(top, "__globals__", None)
    if top_code is not None and top_globals is not None:
        codes.insert(0, (top_code, top_globals))  # the compiled function's own code, wherever it lives
    names = frozenset(name for code, _ in codes for name in code.co_names)
    finder = _Finder(names)
    if module is not None:
        finder.module(module, "module")
        for hooks in _HOOKS:
            source = HooksSource(vars(torch.nn.modules.module), f"_global{hooks}",
                                 f"global module {hooks[1:].replace('_', ' ')} (handle ids)")
            finder.hooks.append(PlainValue(source, source.read()))
    elif isinstance(getattr(fn, "__self__", None), torch.nn.Module):  # compile(model.forward): the model's state
        finder.module(fn.__self__, "module")
    if isinstance(top, types.FunctionType):
        finder.function(top, "the compiled function", top=True)
    elif module is None:  # a callable object (a partial, an instance with __call__): what it holds
        finder.reach(fn, "the compiled callable", 0)
    for i, value in enumerate(arguments):
        finder.reach(value, f"argument {i}", 0)
    for code, namespace in codes:
        finder.globals_of(code, namespace)
    nested = {c for code, _ in codes for c in code.co_consts if isinstance(c, types.CodeType)}
    for code, _ in codes:
        if code.co_freevars and code not in finder.functions and code not in nested:
            raise Unguardable(f"{code.co_name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno}) reads "
                              f"closure variables {', '.join(code.co_freevars)} of a function no guard can reach "
                              "(obtained at run time); pass the values as arguments or make the function a global")
    return finder.found + finder.hooks
