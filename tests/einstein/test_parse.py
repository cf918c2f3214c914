"""parse: equations and shapes against what torch.einsum accepts, rejects and returns."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from einstein_cases import cases, mutated_cases
from tensorcraft.einstein.parse import EinsumError, parse_equation, split_arguments


def torch_outcome(equation, shapes):
    """torch's answer: the result's shape, or None when torch rejects the input."""
    try:
        return tuple(torch.einsum(equation, *[torch.zeros(s) for s in shapes]).shape)
    except Exception:  # torch rejects (through opt_einsum, even an IndexError)
        return None


@given(cases())
def test_valid_equations_give_torchs_output_shape(case):
    eq = parse_equation(case.equation, case.shapes)
    assert eq.output_shape == torch_outcome(case.equation, case.shapes)


@given(mutated_cases())
def test_we_reject_exactly_what_torch_rejects(case):
    expected = torch_outcome(case.equation, case.shapes)
    if expected is None:
        with pytest.raises(EinsumError):
            parse_equation(case.equation, case.shapes)
    else:
        assert parse_equation(case.equation, case.shapes).output_shape == expected


@pytest.mark.parametrize("equation, shapes, fragments", [
    ("ij,jk- >ik", [(2, 3), (3, 4)], ["'-'", "index 5"]),
    ("ij,jk->ik->", [(2, 3), (3, 4)], ["'-'", "index 9"]),
    ("ij\t,jk", [(2, 3), (3, 4)], ["'\\t'", "operand 0"]),
    ("i1,jk", [(2, 3), (3, 4)], ["'1'", "[a-zA-Z]"]),
    ("ij,jk", [(2, 3), (4, 4)], ["'j'", "size 4 in operand 1", "size 3 in operand 0"]),
    ("ii->i", [(2, 3)], ["'i'", "operand 0", "2", "3"]),
    ("ij", [(2, 3, 4)], ["operand 0", "(2, 3, 4)", "'ij'"]),
    ("i.j,jk", [(2, 3), (3, 4)], ["'.'", "operand 0"]),
    ("...a...", [(2, 3)], ["second ellipsis", "operand 0"]),
    ("ij,jk->ii", [(2, 3), (3, 4)], ["'i'", "more than once"]),
    ("ij,jk->z", [(2, 3), (3, 4)], ["'z'", "does not appear"]),
    ("ij,jk", [(2, 3)], ["2 operand(s)", "1 operand(s)"]),
    ("...ij,...jk", [(5, 2, 3), (7, 3, 4)], ["ellipsis dimension 0", "7", "5", "operand 1"]),
])
def test_errors_name_what_was_wrong(equation, shapes, fragments):
    assert torch_outcome(equation, shapes) is None  # torch rejects these too
    with pytest.raises(EinsumError) as info:
        parse_equation(equation, shapes)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_einsum_error_is_both_value_error_and_runtime_error():
    assert issubclass(EinsumError, ValueError) and issubclass(EinsumError, RuntimeError)


def test_spaces_are_ignored_but_not_inside_the_arrow_or_ellipsis():
    assert parse_equation(" i j , j k -> i k ", [(2, 3), (3, 4)]).output_shape == (2, 4)
    for bad in ["ij,jk- >ik", ". ..j,jk"]:
        assert torch_outcome(bad, [(2, 3), (3, 4)]) is None
        with pytest.raises(EinsumError):
            parse_equation(bad, [(2, 3), (3, 4)])


def test_explicit_output_may_drop_the_ellipsis_which_is_then_summed_like_torch():
    eq = parse_equation("...ij,jk->ik", [(5, 2, 3), (3, 4)])
    assert eq.output_shape == (2, 4) == torch_outcome("...ij,jk->ik", [(5, 2, 3), (3, 4)])


def test_equation_prints_labels_shapes_and_sizes():
    text = str(parse_equation("b...ij,bjk", [(2, 7, 3, 4), (2, 4, 5)]))
    assert "'b...ij,bjk->...ik'" in text and "…0" in text and "k=5" in text and "(7, 3, 5)" in text


# ------------------------------------------------------------------ calling conventions

def test_operands_as_one_list_or_tuple():
    a, b = torch.zeros(2, 3), torch.zeros(3, 4)
    assert split_arguments(("ij,jk", [a, b])) == ("ij,jk", [a, b])
    assert split_arguments(("ij,jk", (a, b))) == ("ij,jk", [a, b])


@given(st.lists(st.integers(0, 51), min_size=1, max_size=3), st.booleans())
def test_sublist_format_maps_integers_like_torch(sublist, with_output):
    x = torch.zeros([2] * len(sublist))
    args = (x, sublist) + ((sorted(set(sublist)),) if with_output else ())
    equation, operands = split_arguments(args)
    assert operands[0] is x
    assert parse_equation(equation, [x.shape]).output_shape == tuple(torch.einsum(*args).shape)


def test_sublist_format_with_ellipsis_and_output():
    a, b = torch.zeros(5, 2, 3), torch.zeros(3, 4)
    equation, _ = split_arguments((a, [Ellipsis, 0, 1], b, [1, 2], [Ellipsis, 0, 2]))
    assert equation == "...AB,BC->...AC"


@pytest.mark.parametrize("args", [
    (),                                            # nothing
    ("ij",),                                       # no operands
    ("ij", []),                                    # an empty operand list
    (torch.zeros(2, 3), [0, 52]),                  # out of range
    (torch.zeros(2, 3), [0, -1]),
    (torch.zeros(2, 3), [0, 1.0]),                 # not an integer
    (torch.zeros(2, 3),),                          # sublist missing
])
def test_bad_calls_raise_einsum_error_where_torch_raises(args):
    with pytest.raises((RuntimeError, ValueError, TypeError)):
        torch.einsum(*args)
    with pytest.raises(EinsumError):
        equation, operands = split_arguments(args)
        parse_equation(equation, [np.shape(op) for op in operands])
