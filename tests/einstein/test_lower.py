"""lower: one contraction as permute -> reshape -> bmm -> reshape, checked against torch.einsum."""
import numpy as np
import pytest
import torch
from hypothesis import given

from einstein_cases import cases
from tensorcraft.einstein.lower import plan_pair, plan_single, run_pair, run_single
from tensorcraft.einstein.parse import parse_equation


@given(cases(min_operands=2, max_operands=2, max_size=4))
def test_pair_plan_equals_torch_einsum(case):
    eq = parse_equation(case.equation, case.shapes)
    a, b = case.tensors(np.random.default_rng(4))
    plan = plan_pair(eq.input_labels[0], eq.shapes[0], eq.input_labels[1], eq.shapes[1],
                     keep=eq.output_labels, result=eq.output_labels)
    torch.testing.assert_close(run_pair(plan, a, b), torch.einsum(case.equation, a, b))


@given(cases(min_operands=1, max_operands=1, max_size=4))
def test_single_plan_equals_torch_einsum(case):
    eq = parse_equation(case.equation, case.shapes)
    (x,) = case.tensors(np.random.default_rng(5))
    plan = plan_single(eq.input_labels[0], eq.shapes[0], eq.output_labels)
    torch.testing.assert_close(run_single(plan, x), torch.einsum(case.equation, x))


def test_groups_and_matrix_shapes_of_a_batched_matmul():
    plan = plan_pair("bij", (2, 3, 4), "bjk", (2, 4, 5), keep="bik", result="bik")
    assert (plan.batch, plan.left, plan.summed, plan.right) == (("b",), ("i",), ("j",), ("k",))
    assert plan.kind == "matmul" and plan.a_matrix == (2, 3, 4) and plan.b_matrix == (2, 4, 5)
    assert not plan.a_reshape and not plan.b_reshape and not plan.out_reshape
    assert plan.a_permute is None and plan.out_permute is None
    text = str(plan)
    assert "bmm (2, 3, 4) @ (2, 4, 5)" in text and "batch=b left=i sum=j right=k" in text


def test_labels_of_one_operand_are_summed_before_the_bmm():
    plan = plan_pair("ijx", (2, 3, 7), "jk", (3, 4), keep="ik", result="ik")
    assert plan.a.sum_dims == (2,) and plan.a_matrix == (2, 3)
    a, b = torch.randn(2, 3, 7), torch.randn(3, 4)
    torch.testing.assert_close(run_pair(plan, a, b), torch.einsum("ijx,jk->ik", a, b))


def test_diagonal_is_taken_first_and_broadcast_dims_are_squeezed():
    plan = plan_pair("iij", (3, 3, 4), "jk", (1, 5), keep="ik", result="ik")
    assert plan.a.diagonals == ((0, 1),) and plan.b.squeeze == (0,)
    text = str(plan)
    assert "diagonal over dims (0, 1)" in text and "squeeze broadcast dims (0,)" in text


def test_result_order_is_natural_when_not_fixed():
    plan = plan_pair("ki", (4, 2), "kj", (4, 3), keep="ij")
    assert plan.labels == ("i", "j") and plan.out_permute is None


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
def test_integer_pair_keeps_its_dtype(dtype):
    a = torch.randint(-3, 4, (2, 3), dtype=dtype)
    b = torch.randint(-3, 4, (3, 4), dtype=dtype)
    plan = plan_pair("ij", (2, 3), "jk", (3, 4), keep="", result="")
    out = run_pair(plan, a, b)
    assert out.dtype == dtype
    assert out.item() == torch.einsum("ij,jk->", a.long(), b.long()).item()


@given(cases(min_operands=2, max_operands=4, max_size=4))
def test_einsum_runs_every_pair_through_the_contract_pair_stage(case):
    from tensorcraft.einstein.api import einsum
    from tensorcraft.einstein.lower import contract_pair
    from tensorcraft.stages import substitute

    calls = []

    def counted(a, a_labels, b, b_labels, out_labels):
        calls.append(out_labels)
        return contract_pair.library(a, a_labels, b, b_labels, out_labels)

    tensors = case.tensors(np.random.default_rng(6))
    with substitute(contract_pair=counted):
        got = einsum(case.equation, *tensors)
    torch.testing.assert_close(got, torch.einsum(case.equation, *tensors))
    assert len(calls) == len(case.shapes) - 1


def test_contract_pair_lowers_to_permute_reshape_bmm():
    from tensorcraft.einstein.lower import contract_pair
    a, b = torch.randn(2, 3, 4, 5), torch.randn(4, 2, 6)
    # b batch, k summed, i and j kept from a only, l from b only, output order needs a final permute
    got = contract_pair(a, "bikj", b, "kbl", "ljbi")
    torch.testing.assert_close(got, torch.einsum("bikj,kbl->ljbi", a, b))
