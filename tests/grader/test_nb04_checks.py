"""Notebook 04's checks: the library's own stages pass them (through the real pipeline, against
torch.einsum and opt_einsum), delegating to the tool being rebuilt is caught, and a wrong answer
that equals a mutant gets that mutant's hint."""
import math

import pytest
import torch

from solution_cells import solution
from grader.checks import nb04_einsum_fast as nb04
from grader.mutants import mutants_for
from tensorcraft.einstein.lower import contract_pair



def bmm_lowering(a, a_labels, b, b_labels, out_labels):
    """A correct answer to exercise 1 (the library's own is behind a tripwire there)."""
    batch = [l for l in a_labels if l in b_labels and l in out_labels]
    summed = [l for l in a_labels if l in b_labels and l not in out_labels]
    left = [l for l in a_labels if l not in b_labels]
    right = [l for l in b_labels if l not in a_labels]
    size = dict(zip(a_labels, a.shape)) | dict(zip(b_labels, b.shape))
    nb, m, k, n = (math.prod(size[l] for l in g) for g in (batch, left, summed, right))
    a3 = a.permute([list(a_labels).index(l) for l in batch + left + summed]).reshape(nb, m, k)
    b3 = b.permute([list(b_labels).index(l) for l in batch + summed + right]).reshape(nb, k, n)
    natural = batch + left + right
    out = torch.bmm(a3, b3).reshape([size[l] for l in natural])
    return out.permute([natural.index(l) for l in out_labels])


# the solution notebook's greedy search and FLOP count, and a lowering written as the notebook asks
CORRECT = {"contract_pair": bmm_lowering, "path_flops": solution("04_einsum_fast", "path_flops"),
           "greedy_path": solution("04_einsum_fast", "greedy_path")}


@pytest.mark.parametrize("name", sorted(nb04.EXERCISES))
def test_a_correct_answer_passes_public_and_hidden_cases(name):
    exercise = nb04.EXERCISES[name]
    for report in (exercise.run(CORRECT[name], cuda_available=False),
                   exercise.run(CORRECT[name], hidden=True, seed=7, cuda_available=False)):
        assert not report.failed, report.text()


def test_the_librarys_own_lowering_is_behind_a_tripwire():
    report = nb04.CONTRACT_PAIR.run(contract_pair.library, cuda_available=False)
    assert report.failed and "plan_pair" in report.failed[0].detail
    kept = {"lowering": contract_pair.library}  # out of the name tripwires' sight: the function itself refuses
    report = nb04.CONTRACT_PAIR.run(lambda *args: kept["lowering"](*args), cuda_available=False)
    assert report.failed and "the library's own contract_pair" in report.failed[0].detail


def test_delegating_to_torch_einsum_is_caught():
    def lazy(a, a_labels, b, b_labels, out_labels):
        equation = f"{''.join(a_labels)},{''.join(b_labels)}->{''.join(out_labels)}"
        return torch.einsum(equation, a, b)

    report = nb04.CONTRACT_PAIR.run(lazy, cuda_available=False)
    assert report.failed and "torch.einsum" in report.failed[0].detail


def test_an_invalid_greedy_path_fails_with_the_positions_hint():
    report = nb04.GREEDY_PATH.run(lambda inputs, output, sizes: [(0, n) for n in range(1, len(inputs))],
                                  cuda_available=False)
    assert report.failed and "EinsumError" in report.failed[0].detail
    assert "positions" in report.failed[0].hint


def test_a_flop_count_without_the_addition_gets_that_hint():
    wrong = next(m for m in mutants_for("nb04_einsum_fast.path_flops") if m.name == "path_flops_without_the_addition")

    # the same mistake, written into the notebook's own answer (a mutant called from an answer is refused)
    learner = solution("04_einsum_fast", "path_flops",
                       edits=(("operations = max(1, len(step) - 1) + (1 if touched - result else 0)",
                               "operations = max(1, len(step) - 1)"),))
    report = nb04.PATH_FLOPS.run(learner, cuda_available=False)
    assert report.failed and report.failed[0].hint == wrong.hint


def test_a_lowering_without_a_matrix_product_fails():
    def by_broadcasting(a, a_labels, b, b_labels, out_labels):
        labels = list(dict.fromkeys([*a_labels, *b_labels]))

        def spread(t, own):
            mine = [l for l in labels if l in own]
            t = t.permute([list(own).index(l) for l in mine])
            return t.reshape([t.shape[mine.index(l)] if l in own else 1 for l in labels])

        product = spread(a, a_labels) * spread(b, b_labels)
        summed = [n for n, l in enumerate(labels) if l not in out_labels]
        product = product.sum(dim=summed) if summed else product
        kept = [l for l in labels if l in out_labels]
        return product.permute([kept.index(l) for l in out_labels])

    report = nb04.CONTRACT_PAIR.run(by_broadcasting, cuda_available=False)
    assert len(report.failed) == len(nb04.CONTRACT_PAIR.public())
    assert "made 0 matrix products" in report.text()

    def two_products(*args):
        bmm_lowering(*args)
        return bmm_lowering(*args)

    assert "made 2 matrix products" in nb04.CONTRACT_PAIR.run(two_products, cuda_available=False).text()


def test_integer_lowerings_run_on_the_cpu_only():
    # CUDA has no integer bmm: the solution itself would fail an int64 case there
    for groups in (nb04.CONTRACT_PAIR.public(), nb04.CONTRACT_PAIR.hidden(torch.Generator().manual_seed(1))):
        for group in groups:
            integer = any(not t.dtype.is_floating_point for case in group.cases for t in case.args[1:])
            assert group.cpu_only == integer, group.title
    report = nb04.CONTRACT_PAIR.run(bmm_lowering, cuda_available=False)
    cuda_titles = {o.title for o in report.outcomes if o.device == "cuda"}
    assert cuda_titles and not any("int64" in t for t in cuda_titles)


def test_a_flop_count_must_be_an_int():
    as_float = next(m for m in mutants_for("nb04_einsum_fast.path_flops") if m.name == "path_flops_returns_a_float")
    report = nb04.PATH_FLOPS.run(as_float.fn, cuda_available=False)
    assert len(report.failed) == len(nb04.PATH_FLOPS.public()) and "it must return an int" in report.text()


def test_a_greedy_result_that_drops_a_label_another_operand_needs_fails():
    drops = next(m for m in mutants_for("nb04_einsum_fast.greedy_path")
                 if m.name == "greedy_results_drop_shared_labels")
    report = nb04.GREEDY_PATH.run(drops.fn, cuda_available=False)
    assert [o.title for o in report.failed] == ["a label on three operands stays until the last of them is contracted"]


def test_the_greedy_fallback_rule_is_checked_path_for_path():
    """Where no pair shares a label to sum, rule 2 alone decides; a path within 4x by cost is not enough."""
    def largest_first_fallback(inputs, output, sizes):
        current, path = [set(t) for t in inputs], []
        while len(current) > 1:
            pairs = [(i, j) for i in range(len(current)) for j in range(i + 1, len(current))
                     if (current[i] & current[j]) - set(output)]
            if pairs:
                i, j = pairs[0]
            else:
                i, j = sorted(sorted(range(len(current)), key=lambda p: -math.prod(sizes[c] for c in current[p]))[:2])
            rest = [s for p, s in enumerate(current) if p not in (i, j)]
            kept = (current[i] | current[j]) & set(output).union(*rest)
            path.append((i, j))
            current = rest + [kept]
        return path
    report = nb04.GREEDY_PATH.run(largest_first_fallback, cuda_available=False)
    failed = [o for o in report.failed if o.title.startswith("no pair shares a label")]
    assert failed and "the path" in failed[0].detail and "smallest sizes" in failed[0].hint


@pytest.mark.parametrize("search", ["dp", "optimal"])
def test_another_path_search_kept_in_a_dict_is_refused(search):
    import opt_einsum.paths
    import tensorcraft.einstein.path as tc_path
    functions = {"dp": opt_einsum.paths.dynamic_programming, "optimal": tc_path.optimal_path}  # kept before the check
    sets = {"dp": set, "optimal": frozenset}[search]
    kept = lambda i, o, s: functions[search]([sets(t) for t in i], sets(o), dict(s))
    [first, *_] = nb04.GREEDY_PATH.run(kept, cuda_available=False).failed
    assert "asks you to do without" in first.detail
    assert "forbidden under any name" in first.hint
