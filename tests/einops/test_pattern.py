"""tensorcraft.einops.pattern against einops' own parser, on generated one-sided expressions."""
import einops
import numpy as np
import pytest
from einops.parsing import AnonymousAxis as EinopsAnonymous
from einops.parsing import ParsedExpression, _ellipsis
from hypothesis import given
from hypothesis import strategies as st

from tensorcraft.einops import EinopsError
from tensorcraft.einops.pattern import ELLIPSIS, AnonymousAxis, Expression, parse_expression, split_pattern

# Words einops treats differently: names (valid and with bad underscores), numbers (0, 1, 01, 2),
# the ellipsis, broken dots; plus separators and characters einops rejects.
WORDS = ["a", "b", "h", "w2", "_", "_a", "a_", "x_y", "0", "1", "01", "2", "10", "...", "..", ".", "a.b",
         "2a", "(", ")", "()", " ", "  ", "-", "\t", "é"]


@st.composite
def expressions(draw):
    pieces = draw(st.lists(st.sampled_from(WORDS), max_size=9))
    text = ""
    for piece in pieces:  # mostly separate words by a space, sometimes glue them together
        text += piece + draw(st.sampled_from([" ", " ", ""]))
    return text


def _einops_dims(parsed: ParsedExpression) -> tuple:
    """einops' composition in our vocabulary: ELLIPSIS, tuples of names / anonymous lengths."""
    def axis(a):
        if a == _ellipsis:
            return ELLIPSIS
        return ("#", a.value) if isinstance(a, EinopsAnonymous) else a
    return tuple(ELLIPSIS if dim == _ellipsis else tuple(axis(a) for a in dim) for dim in parsed.composition)


def _our_dims(expression: Expression) -> tuple:
    def axis(a):
        return ("#", a.length) if isinstance(a, AnonymousAxis) else a
    return tuple(dim if dim == ELLIPSIS else tuple(axis(a) for a in dim) for dim in expression.dims)


@pytest.mark.parametrize("flags", [{}, {"allow_underscore": True}, {"allow_underscore": True, "allow_duplicates": True}])
@given(text=expressions())
def test_accepts_and_structures_exactly_like_einops(text, flags):
    try:
        expected = ParsedExpression(text, **flags)
    except RuntimeError as error:  # einops.EinopsError is a RuntimeError
        assert isinstance(error, einops.EinopsError)
        with pytest.raises(EinopsError):
            parse_expression(text, **flags)
        return
    ours = parse_expression(text, **flags)
    assert _our_dims(ours) == _einops_dims(expected)
    assert ours.has_ellipsis == expected.has_ellipsis
    if expected.has_ellipsis:
        assert ours.ellipsis_in_group == expected.has_ellipsis_parenthesized
    assert ours.has_composed_dims == expected.has_composed_axes()
    assert bool(ours.anonymous_axes) == expected.has_non_unitary_anonymous_axes


def test_every_numeric_axis_is_its_own_axis():
    expression = parse_expression("(a 2) (b 2)")
    first, second = expression.anonymous_axes
    assert first.length == second.length == 2 and first != second
    assert len(expression.identifiers) == 4


def test_an_expression_prints_readably():
    expression = parse_expression("b (h 2) ... 1")
    assert expression.dims == (("b",), ("h", expression.anonymous_axes[0]), ELLIPSIS, ())
    assert repr(expression) == "Expression(text='b (h 2) ... 1', dims=(('b',), ('h', 2), '...', ()))"


@pytest.mark.parametrize("text, reason", [
    ("a a", "appears twice"), ("a ... ...", "more than one ellipsis"), ("(a (b))", "one level deep"),
    ("a)", "without a matching"), ("(a", "never closed"), ("a-b", "unexpected character"),
    ("_a", "underscore"), ("0", "positive length"), ("a.b", "dot"), ("2x", "identifier"),
])
def test_errors_name_the_problem_and_the_expression(text, reason):
    with pytest.raises(EinopsError, match=reason) as caught:
        parse_expression(text)
    assert f'"{text}"' in str(caught.value)


@pytest.mark.parametrize("pattern", ["a b", "a -> b -> c", "->->"])
def test_a_pattern_needs_exactly_one_arrow(pattern):
    with pytest.raises(EinopsError, match="exactly one"):
        split_pattern(pattern)
    with pytest.raises(ValueError):  # einops lets a bare ValueError escape here; ours is also one
        einops.rearrange(np.zeros(2), pattern)


def test_einops_error_is_caught_by_the_same_except_clauses_as_einops():
    assert issubclass(einops.EinopsError, RuntimeError)
    assert issubclass(EinopsError, RuntimeError) and issubclass(EinopsError, ValueError)


@pytest.mark.parametrize("name, category", [("for", RuntimeWarning), ("axis", FutureWarning)])
def test_discouraged_names_warn_as_in_einops(name, category):
    with pytest.warns(category):
        ParsedExpression(f"b {name}")
    with pytest.warns(category):
        parse_expression(f"b {name}")
