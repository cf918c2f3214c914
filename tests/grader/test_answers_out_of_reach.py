"""No right answer within the learner's reach while their function runs (issue 20, checks/reach.py): a
mutant plus a small fix, a mutants module's helper, a library helper behind a forbidden stage, a check's
own ground truth, each reached under any name, fails the check with the forbidden-call message, public
and hidden; a right answer still passes, and ``grader check`` still runs the mutants themselves."""
import sys

import pytest

import tensorcraft.einstein.path
from grader.checks import nb04_einsum_fast as nb04
from grader.checks import nb05_rearrange as nb05
from grader.checks import reach
from grader.checks.report import FORBIDDEN
from grader.mutants import REGISTRY, mutants_for, patched
from grader.mutants.nb05_rearrange import _rearrange
from solution_cells import solution
from tensorcraft.einstein.path import path_flops as library_path_flops
from tensorcraft.einstein.path import walk as kept_walk

FLOPS, REARRANGE = nb04.PATH_FLOPS, nb05.REARRANGE
path_flops_returns_a_float = next(m.fn for m in mutants_for(FLOPS.id) if m.name == "path_flops_returns_a_float")


def _refused(exercise, answer, *words):
    """Public and hidden alike, the first failing group fails on a forbidden call naming ``words``."""
    for report in (exercise.run(answer, cuda_available=False),
                   exercise.run(answer, hidden=True, seed=11, cuda_available=False)):
        assert report.failed, f"{answer} passed {exercise.id}"
        first = report.failed[0]
        assert first.reason == FORBIDDEN, first.detail
        assert all(w in first.detail for w in words), first.detail
        assert first.hint


def test_a_mutant_imported_before_the_check_plus_a_fix_is_refused():
    def path_flops(inputs, output, sizes, path):
        return int(path_flops_returns_a_float(inputs, output, sizes, path))
    _refused(FLOPS, path_flops, "path_flops_returns_a_float", "known wrong answers")


def test_a_mutant_imported_inside_the_answer_is_refused():
    def path_flops(inputs, output, sizes, path):
        from grader.mutants import mutants_for
        nearly = next(m.fn for m in mutants_for("nb04_einsum_fast.path_flops") if m.name == "path_flops_returns_a_float")
        return int(nearly(inputs, output, sizes, path))
    _refused(FLOPS, path_flops, "mutants_for")


def test_a_mutant_kept_in_a_dict_is_refused_under_any_name():
    kept = {"f": next(m.fn for m in mutants_for(FLOPS.id) if m.name == "path_flops_returns_a_float")}
    _refused(FLOPS, lambda *args: int(kept["f"](*args)), "path_flops_returns_a_float")


def test_a_mutants_module_not_imported_yet_cannot_be_imported_by_the_answer(monkeypatch):
    monkeypatch.delitem(sys.modules, "grader.mutants.nb11_capstone", raising=False)

    def path_flops(inputs, output, sizes, path):
        import grader.mutants.nb11_capstone  # noqa: F401
        return 0
    _refused(FLOPS, path_flops, "grader.mutants.nb11_capstone")


def test_a_mutants_module_helper_with_its_mistake_undone_is_refused():
    def rearrange(x, pattern, **lengths):
        return _rearrange(x, pattern, lengths, "unchecked")
    _refused(REARRANGE, rearrange, "_rearrange")


def test_a_patch_the_learner_makes_of_the_library_is_refused():
    """A 'mutant' built before the check with an edit that renames a variable is a working copy of the
    stage: calling it (or what it compiled) while the check runs is refused."""
    try:
        copy = patched("nb99_learner.copy", "copy", library_path_flops, ("return sum(", "return 0 + sum("), hint="")
        _refused(FLOPS, lambda *args: copy(*args), "copy")
        _refused(FLOPS, lambda *args: copy._function(*args), "copy")
        assert not copy.grader_own and FLOPS.run(copy, cuda_available=False).failed  # handed in as the answer itself
        assert FLOPS.run(copy._function, cuda_available=False).failed
    finally:
        REGISTRY.pop("nb99_learner.copy", None)


def test_a_library_helper_behind_the_stage_is_refused_under_any_name():
    """walk is what the library's path_flops sums: kept under another name, in a dict, or reached through
    its module, it refuses the learner's code; the library's own pipeline still calls it."""
    kept = {"walk": kept_walk}

    def by_alias(inputs, output, sizes, path):
        return sum(step.flops for step in kept_walk([set(t) for t in inputs], path, set(output), sizes))

    def by_dict(inputs, output, sizes, path):
        return sum(step.flops for step in kept["walk"]([set(t) for t in inputs], path, set(output), sizes))

    def by_module(inputs, output, sizes, path):
        return sum(step.flops for step in tensorcraft.einstein.path.walk([set(t) for t in inputs], path,
                                                                          set(output), sizes))
    for answer in (by_alias, by_dict, by_module):
        _refused(FLOPS, answer, "tensorcraft.einstein.path.walk", "computes what the exercise")


def test_a_checks_own_ground_truth_is_refused():
    kept = {"truth": nb04._flops_reference}
    _refused(FLOPS, lambda *args: kept["truth"](*args), "nb04_einsum_fast._flops_reference")


def test_right_answers_still_pass_and_the_guards_are_lifted_afterwards():
    for exercise, answer in ((FLOPS, solution("04_einsum_fast", "path_flops")),
                             (REARRANGE, solution("05_rearrange", "rearrange"))):
        for report in (exercise.run(answer, cuda_available=False),
                       exercise.run(answer, hidden=True, seed=11, cuda_available=False)):
            assert not report.failed, report.text()
    sets = [{"i", "j"}, {"j", "k"}]
    assert [s.flops for s in kept_walk(sets, [(0, 1)], {"i", "k"}, {"i": 2, "j": 3, "k": 4})] == [48]
    assert path_flops_returns_a_float([frozenset("ij"), frozenset("jk")], frozenset("ik"), {"i": 2, "j": 3, "k": 4},
                                      [(0, 1)]) == 48.0


@pytest.mark.parametrize("name", ["path_flops_returns_a_float", "path_flops_without_the_addition"])
def test_the_grader_still_runs_its_own_mutants_as_answers(name):
    """``grader check`` runs each mutant as an answer: it fails on its own mistake with its own hint."""
    wrong = next(m for m in mutants_for(FLOPS.id) if m.name == name)
    report = FLOPS.run(wrong.fn, cuda_available=False)
    assert report.failed and report.failed[0].reason != FORBIDDEN and report.failed[0].hint == wrong.hint


def test_every_mutant_and_check_helper_is_covered():
    guarded = reach.mutant_functions()
    assert all(m.fn in guarded or m.fn.copies for entries in REGISTRY.values() for m in entries
               if callable(getattr(m.fn, "__code__", None)))
    helpers = reach.answer_helpers(FLOPS).values()
    assert {"tensorcraft.einstein.path.walk", "tensorcraft.einstein.path.contraction_step",
            "tensorcraft.einstein.path.flop_count", "grader.checks.nb04_einsum_fast._flops_reference"} <= set(helpers)
    from grader.checks import nb11_capstone
    from tensorcraft.compiler.examples import TransformerBlock
    assert TransformerBlock.__init__ in reach.answer_helpers(nb11_capstone.EXERCISES["block"])


def test_the_checks_own_truth_and_a_forbidden_stage_kept_in_a_dict_are_refused():
    """``Exercise._expected`` reads the kept truth (``checks/truths.py``) or the reference; a forbidden stage kept
    under a name of its own would run the library's own function: both refuse the learner's code."""
    from grader.checks.exercise import Case
    kept = {"stage": tensorcraft.einstein.path.contract_path}

    flops_expected, case = FLOPS._expected, ("ij,jk->ik", (2, 3), (3, 4), [(0, 1)])

    def by_truth(inputs, output, sizes, path):
        return flops_expected(Case(case), case)
    _refused(FLOPS, by_truth, "ground truth")
    _refused(FLOPS, lambda inputs, output, sizes, path: kept["stage"]("ij,jk->ik", (2, 3), (3, 4)),
             "tensorcraft.einstein.path.contract_path")


def test_a_library_function_that_reads_the_equation_is_refused_even_when_its_error_is_caught():
    """count_iterations' own function parses the equation (raising on an invalid one): a validator that calls
    it and turns whatever it raises into a ValueError fails, though it catches the refusal too."""
    from grader.checks import nb02_einsum_parsing as nb02
    from tensorcraft.einstein.loops import count_iterations as counted

    def validate_equation(equation, ndims):
        try:
            counted.library(equation, *[(2,) * n for n in ndims])
        except Exception as error:
            raise ValueError(str(error)) from None
    _refused(nb02.VALIDATE_EQUATION, validate_equation, "tensorcraft.einstein.loops.count_iterations")


def test_the_guards_leave_the_grading_machinery_as_it_was():
    """Every swapped code is put back, and the guards' own records do not read as a patched grader."""
    from grader.kernel import integrity
    module = "grader.checks.nb04_einsum_fast"
    before = integrity.snapshot(module)
    _refused(FLOPS, lambda *args: int(path_flops_returns_a_float(*args)), "path_flops_returns_a_float")
    after = integrity.snapshot(module)
    assert [k for k in before if k.startswith("grader") and before[k] != after.get(k)] == []
