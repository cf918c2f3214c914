"""One walker for nested values (arguments, results, guarded Python values): ``torch.utils._pytree``.

Every module that looks inside tuples, lists, dicts and the like goes through here, so that they
all agree on what a container is. Before, five hand-written walkers disagreed (one skipped
namedtuples that another rebuilt), and capture recorded the tensors inside a namedtuple as
constants. pytree already knows tuples, lists, dicts, namedtuples, OrderedDict, defaultdict, deque
and ``torch.Size``; this module registers, once, what it lacks:

- ``slice`` (``x[1:n]`` where ``n`` is a tensor's size): its start, stop and step are children;
- dataclasses, each class registered the first time a walk meets an instance (its fields are
  children), unless it cannot be rebuilt from its fields (then it stays a leaf: see
  ``unmappable``).

A type that should never be opened, though it is a dataclass (the compiler's own ``Node``), is
declared with ``keep_whole``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

_WHOLE: set[type] = {torch.Tensor}   # never opened (exact types; tensors are leaves to pytree anyway)
_CANNOT: set[type] = set()           # dataclasses pytree could not register


def keep_whole(cls: type) -> type:
    """Declare ``cls`` a leaf for every walk (usable as a class decorator)."""
    _WHOLE.add(cls)
    return cls


if slice not in pytree.SUPPORTED_NODES:
    pytree.register_pytree_node(slice, lambda s: ([s.start, s.stop, s.step], None),
                                lambda children, _: slice(*children), serialized_type_name="builtins.slice")


def _register(cls: type) -> None:
    try:
        pytree.register_dataclass(cls, serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")
    except Exception:  # noqa: BLE001 - fields that are not init arguments, a name taken: not rebuildable
        _CANNOT.add(cls)


def _is_leaf(value: Any) -> bool:
    """pytree's question, asked before it looks the type up: registers a dataclass it has not seen."""
    cls = type(value)
    if cls in _WHOLE:
        return True
    if cls not in pytree.SUPPORTED_NODES and cls not in _CANNOT and dataclasses.is_dataclass(cls):
        _register(cls)
    return False


def flatten(tree: Any) -> tuple[list[Any], Any]:
    """(leaves, spec), as ``pytree.tree_flatten``, with this module's registrations."""
    return pytree.tree_flatten(tree, is_leaf=_is_leaf)


def unflatten(leaves: list[Any], spec: Any) -> Any:
    return pytree.tree_unflatten(leaves, spec)


def leaves(tree: Any) -> list[Any]:
    return pytree.tree_leaves(tree, is_leaf=_is_leaf)


def map_leaves(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` rebuilt with every leaf replaced by ``fn(leaf)`` (containers rebuilt as their own type)."""
    return pytree.tree_map(fn, tree, is_leaf=_is_leaf)


_CONTAINERS = (tuple, list, dict, set, frozenset)


def unmappable(leaf: Any) -> bool:
    """A leaf that is really a container no walk can rebuild (a tuple subclass that is no namedtuple,
    a set, a dataclass with fields outside ``__init__``): the tensors inside it cannot be followed."""
    return isinstance(leaf, _CONTAINERS) or (dataclasses.is_dataclass(leaf) and not isinstance(leaf, type)
                                              and type(leaf) not in _WHOLE)
