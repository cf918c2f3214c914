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
declared with ``keep_whole``. ``leaves`` and ``map_leaves`` open plain tuples, lists and dicts
themselves, in pytree's order, and hand pytree everything else (``tests/test_trees.py`` holds them
to pytree): the compiler's passes walk every node's arguments, and pytree's own walk was half of a
pass's time.
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


# Exact types walked here without pytree's machinery (its is_leaf call, type lookup and spec for each
# value): a graph's node arguments are made of them, and the compiler's passes walk those for every
# node of every copy. Plain tuples, lists and dicts are opened, in pytree's order; the leaf types are
# ones pytree has no entry for (None, a leaf in this torch's pytree, joins them only if it is one).
_PLAIN_LEAVES = {int, float, bool, complex, str, bytes, torch.dtype, torch.device, type(Ellipsis)} \
    | ({type(None)} if pytree.tree_leaves(None) == [None] else set())


def leaves(tree: Any) -> list[Any]:
    found: list[Any] = []
    _collect(tree, found)
    return found


def _collect(value: Any, found: list[Any]) -> None:
    cls = type(value)
    if cls is tuple or cls is list:
        for item in value:
            _collect(item, found)
    elif cls is dict:
        for item in value.values():
            _collect(item, found)
    elif cls in _WHOLE or cls in _PLAIN_LEAVES:
        found.append(value)
    else:
        found.extend(pytree.tree_leaves(value, is_leaf=_is_leaf))


def map_leaves(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` rebuilt with every leaf replaced by ``fn(leaf)`` (containers rebuilt as their own type)."""
    cls = type(tree)
    if cls is tuple:
        return tuple([map_leaves(fn, item) for item in tree])
    if cls is list:
        return [map_leaves(fn, item) for item in tree]
    if cls is dict:
        return {key: map_leaves(fn, item) for key, item in tree.items()}
    if cls in _WHOLE or cls in _PLAIN_LEAVES:
        return fn(tree)
    return pytree.tree_map(fn, tree, is_leaf=_is_leaf)


_CONTAINERS = (tuple, list, dict, set, frozenset)


def unmappable(leaf: Any) -> bool:
    """A leaf that is really a container no walk can rebuild (a tuple subclass that is no namedtuple,
    a set, a dataclass with fields outside ``__init__``): the tensors inside it cannot be followed."""
    return isinstance(leaf, _CONTAINERS) or (dataclasses.is_dataclass(leaf) and not isinstance(leaf, type)
                                              and type(leaf) not in _WHOLE)
