"""Named-axis einsum: the translation to a letter equation against einops', then the full call."""
import importlib.util

import einops
import numpy as np
import pytest
import torch
from einops.einops import _compactify_pattern_for_einsum
from hypothesis import given
from hypothesis import strategies as st

from tensorcraft.einops import EinopsError, einsum, einsum_equation

OPERAND_WORDS = ["batch", "i", "j", "k", "_", "...", "(i j)", "()", "2", "1", "i_"]


@st.composite
def einsum_patterns(draw):
    n = draw(st.integers(1, 3))
    inputs = [" ".join(draw(st.lists(st.sampled_from(OPERAND_WORDS), max_size=4))) for _ in range(n)]
    output = " ".join(draw(st.lists(st.sampled_from(OPERAND_WORDS + ["z"]), max_size=3, unique=True)))
    arrow = draw(st.sampled_from([" -> ", " -> ", "->", " ", " -> -> "]))
    return ", ".join(inputs) + arrow + output


@given(pattern=einsum_patterns())
def test_translation_matches_einops(pattern):
    try:
        expected = _compactify_pattern_for_einsum(pattern)
    except Exception as error:  # einops raises EinopsError, ValueError, NotImplementedError or RuntimeError
        with pytest.raises(EinopsError) as caught:
            einsum_equation(pattern)
        # drop-in: an `except` clause written for einops' error catches ours (einops.EinopsError
        # itself is einops' class; ours is the builtin class it derives from, RuntimeError)
        builtin = next(kind for kind in type(error).__mro__ if kind.__module__ == "builtins")
        assert isinstance(caught.value, builtin), (type(error), type(caught.value))
        return
    assert einsum_equation(pattern) == expected


@pytest.mark.parametrize("pattern, equation", [
    ("batch i, batch i j -> batch j", "ab,abc->ac"),
    ("i i ->", "aa->"),
    ("out_dim in_dim, ... in_dim -> ... out_dim", "ab,...b->...a"),
])
def test_translation_examples(pattern, equation):
    assert einsum_equation(pattern, 2 if "," in pattern else 1) == _compactify_pattern_for_einsum(pattern) == equation


@pytest.mark.parametrize("pattern, fragment", [
    ("b i, b i j -> b j k", "output axis k is on no input"),
    ("b (i j), b -> b", "(i j) is not supported"),
    ("b i, b i", '"->"'),
    ("b i -> b", "describes 1 inputs, but 2 tensors were given"),
])
def test_translation_errors_say_what_is_wrong(pattern, fragment):
    with pytest.raises(EinopsError) as caught:
        einsum_equation(pattern, 2)
    assert fragment in str(caught.value)


@pytest.mark.parametrize("pattern", ["a (), a -> a", "a b, b -> a 1", "a -> a ()", "a (b c) -> a", "a 2 -> a"])
def test_unsupported_axes_raise_what_einops_raises_and_our_error(pattern):
    """einops raises NotImplementedError for (), 1, numbers and compositions; ours is both that and EinopsError."""
    x = torch.zeros(2, 2)
    operands = (x,) * (pattern.split("->")[0].count(",") + 1)
    with pytest.raises(NotImplementedError):
        einops.einsum(*operands, pattern)
    for caught_as in (NotImplementedError, EinopsError, RuntimeError):
        with pytest.raises(caught_as):
            einsum(*operands, pattern)


def test_einsum_needs_tensors_then_a_pattern():
    with pytest.raises(EinopsError, match="followed by the pattern"):
        einsum("b i -> b")
    with pytest.raises(EinopsError, match="last argument"):
        einsum("b i -> b", torch.zeros(2, 3))


HAS_TENSORCRAFT_EINSUM = importlib.util.find_spec("tensorcraft.einstein.api") is not None


@pytest.mark.skipif(not HAS_TENSORCRAFT_EINSUM, reason="tensorcraft.einstein.api (tensorcraft.einsum) is not in this tree yet")
@pytest.mark.parametrize("backend", ["torch", "numpy"])
@pytest.mark.parametrize("pattern, shapes", [
    ("batch i, batch i j -> batch j", [(2, 3), (2, 3, 4)]),
    ("i i ->", [(3, 3)]),
    ("out_dim in_dim, ... in_dim -> ... out_dim", [(5, 4), (2, 3, 4)]),
    ("a b c, c b d, a g k -> a b k", [(2, 3, 4), (4, 3, 2), (2, 2, 3)]),
])
def test_full_call_matches_einops(pattern, shapes, backend):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    tensors = [torch.from_numpy(a) for a in arrays] if backend == "torch" else arrays
    got, expected = einsum(*tensors, pattern), einops.einsum(*tensors, pattern)
    assert type(got) is type(expected) and tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-10, atol=1e-10)
