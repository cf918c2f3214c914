"""Guards: the conditions under which a compiled entry is still valid for a new call.

A compiled graph bakes in everything it saw: shapes, strides, dtypes, devices, non-tensor
arguments, whether gradients were needed, autocast and the default dtype, the module's training flag, and (when parameters
were folded into constants) the parameters' values. Version counters alone do not see every
change: ``p.data.mul_(2)`` and batchnorm's running-statistics update in training mode leave
``p._version`` as it was, so a graph that folded parameters also keeps a copy of each one and
compares values (one ``torch.equal`` per parameter per call: the price of folding safely).
Before reusing an entry, every one of those is compared; the first mismatch is the reason
for a recompile, and explain() shows it. Plain Python values the program reads besides its
arguments (``self.scale``, ``bn.eps``, a global ``SCALE``) are baked in by capture too: the
module's plain attributes and the globals and closure variables named by the function's own code
are guarded by value (see plain_values for what is not).

Checked at every call, so checked fast: the Python values all at once first (``ValuesUnchanged``:
the ids of the objects read from each dict, the hook dicts still empty, each module's children), and
the module tensors as one tuple per property; only when something differs does ``check_guards`` go
through them one by one, to name what changed. On the 4-block transformer of benchmarks/compile.py
(~220 values, 54 module tensors) that is ~50 us per training call instead of ~90, and ~70 instead of
~105 in inference, where four baked masks are also compared by value.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Sequence

import torch

from ..stages import swappable


def describe_input(value: Any) -> tuple:
    """What a guard remembers about one flat input: a tensor's metadata, a plain value, or (any
    other object: a function, an array) the object itself, compared by identity."""
    if isinstance(value, torch.Tensor):
        return ("tensor", type(value), tuple(value.shape), tuple(value.stride()), value.dtype, value.device,
                value.requires_grad)
    if _is_plain(value):
        return ("value", type(value), value)
    return ("object", type(value), value)


def _input_matches(got: tuple, expected: tuple) -> bool:
    if got[0] != expected[0] or got[1] is not expected[1]:
        return False
    if got[0] == "value":
        return _same(got[2], expected[2])
    if got[0] == "object":
        return got[2] is expected[2]
    return got == expected


_FIELDS = ("kind", "type", "shape", "stride", "dtype", "device", "requires_grad")


@dataclass
class Guards:
    spec: Any                      # pytree structure of (args, kwargs)
    inputs: list[tuple]            # describe_input of each flat input
    names: list[str]               # readable name of each flat input (for messages)
    grad_enabled: bool
    training: bool | None          # the module's flag (None for functions)
    params: list[tuple[int, int, bool, int | None]]  # per module tensor: id, data_ptr, requires_grad, version if frozen
    param_names: list[str]
    constants: list[tuple[torch.Tensor, int]]   # baked tensors and the version they were baked at
    snapshots: list[torch.Tensor | None] | None = None  # copies of the module tensors whose values were baked in
    values: list[PlainValue] = field(default_factory=list)  # Python values read besides the arguments
    constant_snapshots: list[torch.Tensor] | None = None  # copies of the baked tensors, when some were folded
    autocast: tuple = ()           # autocast_state() at capture: it changes the dtypes every op returns
    default_dtype: torch.dtype = torch.float32  # torch.get_default_dtype() at capture

    def __post_init__(self) -> None:
        self.unchanged = ValuesUnchanged(self.values)
        # the module tensors' guards as one tuple per property, compared at once (check_guards)
        self._param_ids = tuple(pid for pid, *_ in self.params)
        self._param_ptrs = tuple(ptr for _, ptr, *_ in self.params)
        self._param_grads = tuple(rg for *_, rg, _ in self.params)
        self._param_versions = tuple(v for *_, v in self.params) \
            if any(v is not None for *_, v in self.params) else None

    def __str__(self) -> str:
        parts = []
        for name, d in zip(self.names, self.inputs):
            if d[0] == "tensor":
                parts.append(f"{name}: {d[1].__name__}{list(d[2])} {str(d[4]).replace('torch.', '')} "
                             f"{d[5]}{' requires_grad' if d[6] else ''}")
            elif d[0] == "value":
                parts.append(f"{name} == {d[2]!r}")
            else:
                parts.append(f"{name} is the same {d[1].__name__} object")
        parts.append(f"grad_enabled={self.grad_enabled}")
        if any(on for _, on, _ in self.autocast):
            parts.append(_show_autocast(self.autocast))
        if self.training is not None:
            parts.append(f"training={self.training}")
        if self.values:
            parts.append(f"{len(self.values)} Python values unchanged ({', '.join(v.name for v in self.values[:3])}"
                         f"{', ...' if len(self.values) > 3 else ''})")
        if self.snapshots and any(c is not None for c in self.snapshots):
            parts.append(f"{sum(c is not None for c in self.snapshots)} module tensors hold the values they were "
                         "folded with")
        elif any(v is not None for *_, v in self.params):
            parts.append(f"{len(self.params)} module tensors unchanged (frozen)")
        return "; ".join(parts)


@swappable
def check_input(name: str, value: Any, remembered: tuple) -> str | None:
    """None if the flat input ``value`` still matches what a guard remembered of it at capture
    (``remembered = describe_input(value_then)``); otherwise the difference, in words, naming ``name``.
    The one input-by-input decision of ``check_guards``: a stage of its own, so that it can be rewritten."""
    got = describe_input(value)
    return None if _input_matches(got, remembered) else _difference(name, got, remembered)


@swappable
def check_guards(guards: Guards, flat: Sequence[Any], spec: Any, training: bool | None,
                 params: Sequence[torch.Tensor]) -> str | None:
    """None if the entry guarded by ``guards`` can run these inputs; otherwise the first failed guard,
    in words. ``params``: the module tensors the entry reads, in ``guards.param_names`` order."""
    if spec is not guards.spec and spec != guards.spec:
        return f"the structure of the arguments changed ({spec} != {guards.spec})"
    if torch.is_grad_enabled() != guards.grad_enabled:
        return f"grad mode changed: torch.is_grad_enabled() is {torch.is_grad_enabled()}, was {guards.grad_enabled}"
    if torch.get_default_dtype() != guards.default_dtype:  # torch.zeros(3) follows it
        return f"default dtype changed: {torch.get_default_dtype()}, was {guards.default_dtype}"
    if autocast_state() != guards.autocast:
        return f"autocast changed: {_show_autocast(autocast_state())}, was {_show_autocast(guards.autocast)}"
    if training != guards.training:
        return f"training mode changed: module.training is {training}, was {guards.training}"
    for name, value, expected in zip(guards.names, flat, guards.inputs):
        why = check_input(name, value, expected)
        if why is not None:
            return why
    if not _params_unchanged(guards, params):  # then find the first difference, in words
        for name, tensor, (pid, ptr, requires_grad, version) in zip(guards.param_names, params, guards.params):
            if id(tensor) != pid:
                return f"module tensor {name} was replaced by another tensor"
            if tensor.data_ptr() != ptr:  # `.data = ...`, module.to(...): same object, new memory
                return f"module tensor {name} now holds different memory (.data was replaced or moved)"
            if tensor.requires_grad != requires_grad:
                return f"module tensor {name}: requires_grad is {tensor.requires_grad}, was {requires_grad}"
            if version is not None and tensor._version != version:
                return f"module tensor {name} changed in place since it was folded into constants"
    for name, tensor, copy in zip(guards.param_names, params, guards.snapshots or ()):
        if copy is not None and not torch.equal(tensor, copy):  # changed without a version bump (p.data, batchnorm stats)
            return f"module tensor {name} holds other values than when it was folded into constants"
    for tensor, version in guards.constants:
        if tensor._version != version:
            return f"a captured constant tensor{list(tensor.shape)} changed in place"
    for tensor, copy in zip((t for t, _ in guards.constants), guards.constant_snapshots or ()):
        if not torch.equal(tensor, copy):
            return f"a captured constant tensor{list(tensor.shape)} holds other values than when it was folded"
    for value in guards.values if not guards.unchanged() else guards.unchanged.rest:
        if value.read() is value.value and value.items is None:  # the same object: unchanged (the fast path)
            continue
        why = value.changed()
        if why is not None:
            return why
    return None


_requires_grad = operator.attrgetter("requires_grad")
_version = operator.attrgetter("_version")


def _params_unchanged(guards: Guards, params: Sequence[torch.Tensor]) -> bool:
    """The module tensors are the same objects, in the same memory, with the same requires_grad (and
    versions, when frozen): one tuple per property, built and compared in C, not a loop per tensor."""
    return len(params) == len(guards._param_ids) and tuple(map(id, params)) == guards._param_ids \
        and tuple(map(torch.Tensor.data_ptr, params)) == guards._param_ptrs \
        and tuple(map(_requires_grad, params)) == guards._param_grads \
        and (guards._param_versions is None or tuple(map(_version, params)) == guards._param_versions)


_MISSING = object()
_PLAIN = (bool, int, float, complex, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)
# what every nn.Module keeps in its __dict__ (hook dictionaries, flags): not the model's values. `training`
# stays: `model.dropout.train()` changes a submodule only
_MODULE_BOOKKEEPING = frozenset(vars(torch.nn.Module())) - {"training"}


@dataclass
class PlainValue:
    """A Python value the program may read (``self.scale``, a global, a closure variable), baked in by capture."""
    name: str                    # for messages: "module attribute bn.eps"
    read: Callable[[], Any]      # reads the current value (_MISSING when it is gone)
    value: Any                   # the value at capture
    by_identity: bool = False    # objects (a tensor, a module, a helper function): the same object, not ==
    items: tuple | None = None   # a container of objects (self.tensors = [t]): what it held, each by identity
    exact: bool = False          # compared with == alone (our own tuples of names and ids: no 2 vs 2.0 to tell)

    def __post_init__(self) -> None:
        if self.by_identity and isinstance(self.value, (list, tuple, dict)):
            self.items = _items(self.value)

    def changed(self) -> str | None:
        now = self.read()
        if self.by_identity:
            if now is not self.value:
                return f"{self.name} now refers to another object"
            if self.items is not None and not _same_items(_items(now), self.items):
                return f"{self.name} holds other objects than at capture"
            return None
        same = now == self.value if self.exact else _same(now, self.value)
        return None if same else f"{self.name} is {now!r}, was {self.value!r}"


class ValuesUnchanged:
    """All the Python values of a guard checked at once, for the common call where none changed.

    Checked one by one, the ~220 values of a 4-block transformer (attributes of every submodule, four
    kinds of hooks each, the tree of submodules) cost ~100 us per call. Most are read from a dict
    (a module's ``__dict__``, the globals) and were the very object captured: one ``map`` per dict
    compares their ids (the guard keeps the objects alive, so an id is never reused). Hooks captured
    absent are one ``any`` over their dicts. Calling this returns True when all of those hold; the
    values it cannot vouch for (lists and dicts, compared by value; containers of objects; closure
    cells) are ``rest``, which ``check_guards`` still checks one by one. When it returns False,
    ``check_guards`` checks every value, so the reason it gives names the one that changed."""

    def __init__(self, values: Sequence[PlainValue]) -> None:
        by_dict: dict[int, tuple[dict, list[str], list[int]]] = {}
        hook_dicts: list[dict] = []
        self._trees: list[tuple[tuple, tuple]] = []  # (modules, their children then) for each tree guarded
        self.rest: list[PlainValue] = []
        for value in values:
            source = _dict_read(value.read)
            tree = _tree_read(value.read)
            if source is not None and value.items is None and source[0].get(source[1], _MISSING) is value.value:
                namespace, key = source
                entry = by_dict.setdefault(id(namespace), (namespace, [], []))
                entry[1].append(key)
                entry[2].append(id(value.value))
            elif _hook_read(value.read) is not None and value.value == () and \
                    isinstance(_hook_read(value.read)[0].get(_hook_read(value.read)[1]), dict):
                namespace, name = _hook_read(value.read)
                hook_dicts.append(namespace[name])
                entry = by_dict.setdefault(id(namespace), (namespace, [], []))  # and the dict is still that one
                entry[1].append(name)
                entry[2].append(id(namespace[name]))
            elif tree is not None and value.value == _submodule_ids(tree):
                modules = tuple(m for _, m in tree.named_modules())
                self._trees.append((modules, _children(modules)))
            else:
                self.rest.append(value)
        # itemgetter of several keys returns a tuple; of one key, the value: give it a second key (the same)
        self._dicts = [(namespace, operator.itemgetter(*keys, *keys[:1] if len(keys) == 1 else ()),
                        tuple(ids + ids[:1] if len(keys) == 1 else ids)) for namespace, keys, ids in by_dict.values()]
        self._hook_dicts = tuple(hook_dicts)
        self._alive = [value.value for value in values]  # the objects whose ids are compared

    def __call__(self) -> bool:
        try:
            for namespace, get, ids in self._dicts:
                if tuple(map(id, get(namespace))) != ids:
                    return False
        except KeyError:  # an attribute or a global was deleted
            return False
        return not any(self._hook_dicts) and all(_children(modules) == then for modules, then in self._trees)


def _dict_read(read: Callable) -> tuple[dict, str] | None:
    """(namespace, key) when ``read`` is ``functools.partial(namespace.get, key, _MISSING)``."""
    if isinstance(read, functools.partial) and len(read.args) == 2 and read.args[1] is _MISSING \
            and not read.keywords and isinstance(getattr(read.func, "__self__", None), dict) \
            and getattr(read.func, "__name__", None) == "get":
        return read.func.__self__, read.args[0]
    return None


def _tree_read(read: Callable) -> Any:
    """The module when ``read`` is ``functools.partial(_submodule_ids, module)``."""
    if isinstance(read, functools.partial) and read.func is _submodule_ids and len(read.args) == 1:
        return read.args[0]
    return None


def _hook_read(read: Callable) -> tuple[dict, str] | None:
    """(namespace, hooks attribute) when ``read`` is ``functools.partial(_hook_ids, namespace, name)``."""
    if isinstance(read, functools.partial) and read.func is _hook_ids and len(read.args) == 2 and not read.keywords:
        return read.args[0], read.args[1]
    return None


def _items(container: Any) -> tuple:
    return tuple(container.items()) if isinstance(container, dict) else tuple(container)


def _same_items(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y or (isinstance(x, tuple) and x[0] == y[0] and x[1] is y[1])
                                    for x, y in zip(a, b))


def _is_plain(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_is_plain(k) and _is_plain(v) for k, v in value.items())
    return isinstance(value, _PLAIN)


def _snapshot(value: Any) -> Any:
    """A copy of a plain value that later in-place changes (``self.sizes.append(4)``) do not reach."""
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types (``2`` and ``2.0`` give different dtypes in torch)."""
    if a is b:
        return True
    if isinstance(a, (tuple, list)) and type(a) is type(b):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and type(a) is type(b):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a is b or (type(a) is type(b) and a == b)


def plain_values(fn: Callable, module: Any = None) -> list[PlainValue]:
    """The Python values a capture may have baked in besides the arguments: every attribute of the
    module and its submodules (training flags included), which submodules and hooks it has, and the
    globals and closure variables that the top-level function's own code names (plain values by
    value, other objects by identity; a module found there is walked like the compiled one).
    Helpers it calls are not inspected: their globals are not guarded."""
    found: list[PlainValue] = []
    hook_values: list[PlainValue] = []  # listed last: explain() names the first few values
    if module is not None:
        _walk_module(module, "module", found, hook_values)
        for hooks in _HOOKS:
            read = functools.partial(_hook_ids, vars(torch.nn.modules.module), f"_global{hooks}")
            hook_values.append(PlainValue(f"global module {hooks[1:].replace('_', ' ')} (handle ids)", read, read()))
        fn = module.forward
    elif isinstance(getattr(fn, "__self__", None), torch.nn.Module):  # compile(model.forward): the model's state
        _walk_module(fn.__self__, "module", found, hook_values)
    func = getattr(fn, "__func__", fn)
    code, namespace = getattr(func, "__code__", None), getattr(func, "__globals__", None)
    if code is None or namespace is None:
        return found + hook_values
    named = [(f"global {name}", functools.partial(namespace.get, name, _MISSING))
             for name in code.co_names if name in namespace]
    named += [(f"closure variable {name}", functools.partial(_cell_value, cell))
              for name, cell in zip(code.co_freevars, func.__closure__ or ())]
    for label, read in named:
        value = read()
        if value is _MISSING:  # a closure cell not assigned yet
            continue
        plain = _is_plain(value)  # plain values by value; tensors, modules, functions by identity
        found.append(PlainValue(label, read, _snapshot(value) if plain else value, by_identity=not plain))
        if isinstance(value, torch.nn.Module):  # net = nn.Dropout(); def f(x): return net(x)
            _walk_module(value, label, found, hook_values)
    return found + hook_values


def _walk_module(module: Any, label: str, found: list[PlainValue], hook_values: list[PlainValue]) -> None:
    """Guards for a module's own Python state: its attributes, its submodules, its hooks."""
    for qual, sub in module.named_modules():
        where = f"{label} {qual}".rstrip() if label != "module" else f"module {qual or '(top)'}"
        namespace = vars(sub)
        for attr, value in namespace.items():
            if attr in _MODULE_BOOKKEEPING or isinstance(value, torch.Tensor):  # tensors: param nodes
                continue
            read = functools.partial(namespace.get, attr, _MISSING)
            plain = _is_plain(value)  # by value; other objects (self.act = torch.relu) by identity
            name = f"module attribute {qual + '.' if qual else ''}{attr}" if label == "module" \
                else f"attribute {attr} of {where}"
            found.append(PlainValue(name, read, _snapshot(value) if plain else value, by_identity=not plain))
        for hooks in _HOOKS:  # a hook's torch calls are captured with the module's
            read = functools.partial(_hook_ids, namespace, hooks)
            hook_values.append(PlainValue(f"{hooks[1:].replace('_', ' ')} of {where} (handle ids)", read, read()))
    read = functools.partial(_submodule_ids, module)  # model[1] = nn.Tanh(): same parameters, other code
    found.append(PlainValue(f"the {label}'s submodules (names and ids)" if label == "module"
                            else f"the submodules of {label} (names and ids)", read, read(), exact=True))


_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _hook_ids(namespace: dict, name: str) -> tuple:
    return tuple(namespace.get(name, {}).keys())


def _submodule_ids(module: Any) -> tuple:
    return tuple((qual, id(sub)) for qual, sub in module.named_modules())


def _children(modules: tuple) -> tuple:
    """Each module's direct submodules, names and ids: cheaper to read at every call than
    ``_submodule_ids``, and unchanged exactly when it is (the walk from the root meets the same
    modules under the same names). ``modules`` keeps the captured ones alive: no id is reused."""
    return tuple((tuple(m._modules), tuple(map(id, m._modules.values()))) for m in modules)


def _cell_value(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING


_AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple:
    """(device, enabled, dtype) for each device type autocast knows: the dtypes ops return depend on it."""
    return tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES)


def _show_autocast(state: tuple) -> str:
    on = [f"{d} {str(dtype).replace('torch.', '')}" for d, enabled, dtype in state if enabled]
    return f"autocast on ({', '.join(on)})" if on else "autocast off"


def _difference(name: str, got: tuple, expected: tuple) -> str:
    if got[0] != expected[0] or got[1] != expected[1]:
        return f"input {name}: type {got[1].__name__} != {expected[1].__name__}"
    if got[0] == "value":
        return f"input {name}: value {got[2]!r} != {expected[2]!r}"
    if got[0] == "object":
        return f"input {name}: another {got[1].__name__} object"
    for field_name, a, b in zip(_FIELDS, got, expected):
        if a != b:
            show = (lambda v: list(v)) if field_name in ("shape", "stride") else (lambda v: v)
            return f"input {name}: {field_name} {show(a)} != {show(b)}"
    return f"input {name} differs"


def build_guards(flat: Sequence[Any], spec: Any, names: Sequence[str], training: bool | None,
                 param_names: Sequence[str], params: Sequence[torch.Tensor], frozen: bool,
                 constants: Sequence[torch.Tensor] = (), baked: Collection[str] = (), folded_constants: bool = False,
                 values: Sequence[PlainValue] = ()) -> Guards:
    """Remember what this call looked like. ``baked``: the module tensors whose values the compiled code
    baked in; ``folded_constants``: it baked in values computed from the captured constants (the
    values of both are compared at every call)."""
    snapshots = [t.detach().clone() if name in baked else None for name, t in zip(param_names, params)] \
        if baked else None
    constant_snapshots = [t.detach().clone() for t in constants] if folded_constants else None
    return Guards(spec, [describe_input(v) for v in flat], list(names), torch.is_grad_enabled(), training,
                  [(id(t), t.data_ptr(), t.requires_grad, t._version if frozen else None) for t in params],
                  list(param_names),
                  [(t, t._version) for t in constants], snapshots, list(values), constant_snapshots,
                  autocast_state(), torch.get_default_dtype())
