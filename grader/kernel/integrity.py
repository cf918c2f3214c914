"""A fingerprint of the grading machinery inside a learner's kernel, to catch a notebook that patches it.

A check runs in the learner's own process, so learner code can replace what the check relies on:
``Exercise.check``, ``compare.mismatch``, a check module in ``sys.modules``, ``torch.allclose``,
a builtin. Before any learner cell runs, the grader (``execute.GuardedExecute``) calls
:func:`install` in the kernel: it imports the machinery and records, for every object in it, the
identity of each function, its code, defaults and closure, each class's attributes, each small
constant's value. After every cell the grader calls :func:`verify`, which names what changed since;
a change scores that cell and every later graded cell 0, with the reason in the feedback.

This raises the bar; it is not a proof. Code in the same process can, in principle, also replace the
verifier; the sandbox (``grader.worker.sandbox``) bounds what such code can do, and the instructor sees the
submitted source.
"""
from __future__ import annotations

import builtins
import hashlib
import importlib
import sys
import types
from typing import Any

# Modules whose every top-level object the checks rely on; the assignment's own check module is added.
MACHINERY = ("grader.checks.exercise", "grader.checks.compare", "grader.checks.tripwire", "grader.checks.ops",
             "grader.checks.report", "grader.checks.record", "grader.checks.seed", "grader.checks.devices", "grader.checks.truths",
             "grader.checks.spy", "grader.checks.stages", "grader.checks.programs", "grader.checks.reach",
             "grader.mutants",
             "grader.kernel.progress", "grader.kernel.integrity")
# Namespaces of the tools the checks compute and compare with: every entry present at install time.
TOOLS = ("torch", "torch.random", "torch.nn.functional", "torch.overrides", "torch.utils._python_dispatch", "numpy")
TOOL_CLASSES = ("torch.Tensor", "torch._C.TensorBase", "numpy.ndarray")
SMALL = 4096        # constants whose repr is shorter than this are compared by value
# Filled as the notebook runs (mutants register on first use); they choose hints, never scores.
BY_IDENTITY = frozenset({"grader.mutants.REGISTRY"} |   # and the guards' own records, kept as checks run
                        {f"grader.checks.reach.{n}" for n in ("REGISTRY", "_NOW", "_MUTANTS", "_HELPERS", "_LATEST", "_GUARDS",
                                                              "_TWINS", "_PLANS")})

_baseline: dict[str, Any] | None = None


def _function_token(fn: Any) -> tuple:
    fn = getattr(fn, "__func__", fn)
    cells = tuple(id(c.cell_contents) if _filled(c) else 0 for c in (getattr(fn, "__closure__", None) or ()))
    return (id(fn), id(getattr(fn, "__code__", None)), id(getattr(fn, "__defaults__", None)),
            repr(getattr(fn, "__kwdefaults__", None)), cells)


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (reading an empty cell raises ValueError: that is the test)
    except ValueError:
        return False
    return True


def _token(value: Any) -> Any:
    if isinstance(value, (types.FunctionType, types.MethodType, staticmethod, classmethod)):
        return _function_token(value)
    if isinstance(value, property):
        return tuple(_token(f) for f in (value.fget, value.fset, value.fdel))
    if isinstance(value, (str, bytes, int, float, bool, type(None), tuple, list, dict, set, frozenset)):
        text = repr(value)
        return (type(value).__name__, text) if len(text) < SMALL else id(value)
    return id(value)


# What Python itself caches on a class, not a change: copyreg keeps ``__slotnames__`` on a class the first
# time one of its instances is copied or pickled (notebook 07's ``OnMeta`` case arguments, kept as truths).
PYTHONS_OWN = frozenset({"__slotnames__"})


def _class_tokens(prefix: str, cls: type, into: dict[str, Any]) -> None:
    into[prefix] = (id(cls), tuple(sorted(set(vars(cls)) - PYTHONS_OWN)))          # an attribute added is a change too
    for name, value in vars(cls).items():
        if name not in ("__dict__", "__weakref__", "__doc__") and name not in PYTHONS_OWN:
            into[f"{prefix}.{name}"] = _token(value)


def _module_tokens(name: str, into: dict[str, Any]) -> None:
    module = sys.modules.get(name)
    into[f"sys.modules[{name!r}]"] = id(module)
    if module is None:
        return
    for attribute, value in list(vars(module).items()):
        if (attribute.startswith("__") and attribute != "__getattr__") or (name == __name__ and attribute == "_baseline"):
            continue
        key = f"{name}.{attribute}"
        if key in BY_IDENTITY:
            into[key] = id(value)
        elif isinstance(value, type) and value.__module__ == name:
            _class_tokens(key, value, into)
        elif hasattr(value, "__dataclass_fields__") and not isinstance(value, type):  # e.g. an Exercise
            into[key] = id(value)
            for field_name, field_value in vars(value).items():
                into[f"{key}.{field_name}"] = _token(field_value)
        else:
            into[key] = _token(value)


def _resolve(dotted: str) -> Any:
    module, _, attribute = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def snapshot(check_module: str | None = None) -> dict[str, Any]:
    """name -> token for everything a check relies on, as it is now."""
    tokens: dict[str, Any] = {}
    for name in MACHINERY + ((check_module,) if check_module else ()):
        _module_tokens(name, tokens)
    for name in TOOLS:
        module = sys.modules.get(name)
        for attribute, value in list(vars(module).items()) if module else ():
            if not attribute.startswith("_") or name == "builtins":
                tokens[f"{name}.{attribute}"] = id(_unwrapped(value))
    for dotted in TOOL_CLASSES:   # what each name resolves to: an override of an inherited one shows
        resolved: dict[str, Any] = {}
        for klass in reversed(_resolve(dotted).__mro__):
            resolved.update(vars(klass))
        for attribute, value in resolved.items():
            tokens[f"{dotted}.{attribute}"] = id(value)
    for attribute, value in vars(builtins).items():
        if not attribute.startswith("_") and callable(value):
            tokens[f"builtins.{attribute}"] = id(value)
    tokens["sys.gettrace()"] = id(sys.gettrace())
    tokens["sys.getprofile()"] = id(sys.getprofile())
    return tokens


def _disable_dynamo_code() -> Any:
    import torch
    return torch._disable_dynamo(len).__code__


def _unwrapped(value: Any) -> Any:
    """What a ``torch._disable_dynamo`` wrapper calls; anything else as it is. Importing
    ``torch._dynamo`` (which a notebook may do at any moment, by ``torch.compile`` or a dispatch
    watch) rewraps ``torch.manual_seed`` so; that is torch's own doing, not a change. The function
    is read from the wrapper's closure, not from ``__wrapped__``, which anyone can set."""
    code = getattr(value, "__code__", None)
    if code is not None and code is _DISABLE_DYNAMO_CODE[0] and "fn" in code.co_freevars:
        cell = value.__closure__[code.co_freevars.index("fn")]
        return _unwrapped(cell.cell_contents) if _filled(cell) else value
    return value


_DISABLE_DYNAMO_CODE: list = [None]


def _digest(tokens: dict[str, Any]) -> str:
    return hashlib.sha256(repr(sorted(tokens.items())).encode()).hexdigest()


def install(check_module: str | None = None) -> tuple[int, str]:
    """Import the machinery and record its fingerprint; returns how many objects it covers and the
    fingerprint's digest, which the grader keeps: a fingerprint retaken later shows as another digest."""
    global _baseline
    for name in MACHINERY + TOOLS + ((check_module,) if check_module else ()):
        importlib.import_module(name)
    _DISABLE_DYNAMO_CODE[0] = _disable_dynamo_code()
    tokens = snapshot(check_module)
    _baseline = {"check_module": check_module, "tokens": tokens, "digest": _digest(tokens)}
    return len(tokens), _baseline["digest"]


def changes() -> list[str]:
    """Every name whose object changed since :func:`install`."""
    if _baseline is None:
        return ["grader.kernel.integrity (no fingerprint was taken)"]
    now = snapshot(_baseline["check_module"])
    return [name for name, token in _baseline["tokens"].items() if now.get(name) != token]


def verify(nonce: str) -> tuple[str, str, list[str]]:
    """(nonce, the fingerprint's digest, the first five names whose object changed since :func:`install`)."""
    return nonce, (_baseline or {}).get("digest", ""), changes()[:5]
