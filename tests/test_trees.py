"""``tensorcraft.trees`` walks plain tuples, lists and dicts itself (fast, for the compiler's passes)
and everything else through torch's pytree: both must give what pytree alone gives, leaf for leaf,
in the same order, with the same containers rebuilt."""
import collections

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils import _pytree as pytree

from tensorcraft import trees
from tensorcraft.compiler.ir import Node

Pair = collections.namedtuple("Pair", "first second")
NODE = Node("x", "placeholder", "x")

scalars = st.one_of(st.none(), st.integers(-3, 3), st.floats(allow_nan=False), st.booleans(), st.text(max_size=2),
                    st.just(torch.float32), st.just(torch.device("cpu")), st.just(Ellipsis), st.just(NODE),
                    st.just(torch.ones(2)), st.builds(slice, st.integers(0, 3), st.integers(4, 8)))
nested = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=2), inner, max_size=3),
    st.builds(Pair, inner, inner), st.dictionaries(st.text(max_size=2), inner, max_size=2).map(collections.OrderedDict),
    st.lists(st.integers(0, 4), max_size=3).map(torch.Size)), max_leaves=12)


def _is_leaf(value):
    return type(value) is Node


@settings(max_examples=300, deadline=None)
@given(nested)
def test_the_leaves_are_pytrees_in_its_order(tree):
    assert [id(v) for v in trees.leaves(tree)] == [id(v) for v in pytree.tree_leaves(tree, is_leaf=_is_leaf)]


@settings(max_examples=300, deadline=None)
@given(nested)
def test_a_mapped_tree_is_pytrees_with_its_containers(tree):
    def mark(leaf):
        return ("leaf", id(leaf))
    ours, theirs = trees.map_leaves(mark, tree), pytree.tree_map(mark, tree, is_leaf=_is_leaf)
    assert ours == theirs
    assert _types(ours) == _types(theirs)


def _types(tree):
    """Every container's type, in walk order (``==`` alone equates a namedtuple with a tuple, and an
    OrderedDict with a dict)."""
    found = [type(tree)]
    if isinstance(tree, (tuple, list)):
        for item in tree:
            found += _types(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            found += _types(item)
    return found
