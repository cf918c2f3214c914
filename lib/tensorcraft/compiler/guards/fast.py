"""The fast path: every guard of an entry checked at once, for the common call where nothing changed.

Checked one by one, the ~220 Python values of a 4-block transformer (attributes of every submodule,
four kinds of hooks each, the tree of submodules) cost ~100 us per call. Most are read from a dict
(a module's ``__dict__``, the globals: a ``DictSource``) and were the very object captured: one
``map`` per dict compares their ids (the guard keeps the objects alive, so an id is never reused).
Hooks captured absent are one ``any`` over their dicts. The module tensors are compared as one tuple
per property. Only when something differs does ``check_guards`` go through the guards one by one,
to name what changed.
"""
from __future__ import annotations

import operator
from typing import Sequence

import torch

from .values import HooksSource, PlainValue, SubmodulesSource, MISSING


class ValuesUnchanged:
    """Calling it returns True when all the values it vouches for are unchanged; the values it cannot
    vouch for (lists and dicts, compared by value; containers of objects; closure cells) are ``rest``,
    which ``check_guards`` still checks one by one. When it returns False, ``check_guards`` checks
    every value, so the reason it gives names the one that changed."""

    def __init__(self, values: Sequence[PlainValue]) -> None:
        by_dict: dict[int, tuple[dict, list, list[int]]] = {}
        hook_dicts: list[dict] = []
        self._trees: list[tuple[tuple, tuple]] = []  # (modules, their children then) for each tree guarded
        self.rest: list[PlainValue] = []
        for value in values:
            source = value.source
            entry = source.entry()
            if entry is not None and value.items is None and entry[0].get(entry[1], MISSING) is value.value:
                namespace, key = entry
                ids = by_dict.setdefault(id(namespace), (namespace, [], []))
                ids[1].append(key)
                ids[2].append(id(value.value))
            elif isinstance(source, HooksSource) and value.value == () and \
                    isinstance(source.namespace.get(source.key), dict):
                hook_dicts.append(source.namespace[source.key])
                ids = by_dict.setdefault(id(source.namespace), (source.namespace, [], []))  # and still that dict
                ids[1].append(source.key)
                ids[2].append(id(source.namespace[source.key]))
            elif isinstance(source, SubmodulesSource) and value.value == source.read():
                modules = tuple(m for _, m in source.module.named_modules())
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


def _children(modules: tuple) -> tuple:
    """Each module's direct submodules, names and ids: cheaper to read at every call than the
    qualified names of the whole tree, and unchanged exactly when they are (the walk from the root
    meets the same modules under the same names). ``modules`` keeps the captured ones alive."""
    return tuple((tuple(m._modules), tuple(map(id, m._modules.values()))) for m in modules)


_requires_grad = operator.attrgetter("requires_grad")
_version = operator.attrgetter("_version")


def params_unchanged(guards, params: Sequence[torch.Tensor]) -> bool:
    """The module tensors are the same objects, in the same memory, with the same requires_grad (and
    versions, when frozen): one tuple per property, built and compared in C, not a loop per tensor."""
    return len(params) == len(guards._param_ids) and tuple(map(id, params)) == guards._param_ids \
        and tuple(map(torch.Tensor.data_ptr, params)) == guards._param_ptrs \
        and tuple(map(_requires_grad, params)) == guards._param_grads \
        and (guards._param_versions is None or tuple(map(_version, params)) == guards._param_versions)
