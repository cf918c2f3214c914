"""No right answer can be imported from ``grader.mutants`` (issue 20): a learner's kernel can import the
package, and the tripwires guard only the library. An answer that takes its result from a mutants module
(a helper with its switches off, a table of right answers, a patch that changes nothing) gets no marks."""
import importlib
import inspect

import pytest

from grader.checks import nb01_einsum_notation as nb01
from grader.checks.exercise import Exercise
from grader.checks.report import PASS
from grader.mutants import REGISTRY, Patched, mutants_for, patched

CONVERTED = ["nb01_einsum_notation", "nb02_einsum_parsing", "nb03_einsum_loops", "nb04_einsum_fast",
             "nb06_reduce_repeat_pack", "nb07_graph_capture", "nb09_fusion_memory", "nb10_code_generation"]


def _own_callables(module):
    """Every function a mutants module defines at its top level, the private helpers included."""
    return [(name, value) for name, value in vars(module).items()
            if (inspect.isfunction(value) and value.__module__ == module.__name__) or isinstance(value, Patched)]


@pytest.mark.parametrize("notebook", CONVERTED + ["nb11_capstone"])
def test_no_copy_of_a_stage_or_of_the_answers_is_left_in_the_module(notebook):
    module = importlib.import_module(f"grader.mutants.{notebook}")
    for gone in ("SOLUTION", "_lifetimes", "_group", "_plan", "_validate", "_sizes", "_once", "_attention",
                 "_correct_attention", "_Block", "_merge_views", "_loops", "_source", "_label_sizes", "_read",
                 "_reduce", "_repeat", "_head", "_greedy", "_as_matrices", "_walk", "_groups", "_capture", "_Tracer",
                 "_guard", "_refusal", "_python_source", "_c_source", "_generate_wrapper", "element_offset"):
        assert not hasattr(module, gone)


@pytest.mark.parametrize("notebook", CONVERTED)
def test_every_function_of_a_mutants_module_fails_every_exercise_as_an_answer(notebook, monkeypatch):
    """Each module-level function, the adapters and helpers included, handed in as the answer (calling it
    as it is): none passes the public cases of any exercise of its notebook. Whether a group passes never
    depends on which mistake its failure is diagnosed as, so the diagnosis (every mutant tried again on
    each failing case: minutes for the compiler notebooks) is switched off here."""
    monkeypatch.setattr(Exercise, "_known_mistakes", lambda self: [])
    module = importlib.import_module(f"grader.mutants.{notebook}")
    exercises = importlib.import_module(f"grader.checks.{notebook}").EXERCISES
    candidates = _own_callables(module) + [(m.name, m.fn) for e in exercises.values() for m in mutants_for(e.id)]
    assert candidates
    for name, fn in candidates:
        for exercise in exercises.values():
            assert exercise.run(fn, cuda_available=False).failed, f"{name} passes {exercise.id}"


def test_no_full_table_of_equations_can_be_put_together_from_the_mutants():
    """Each equations mutant holds only the entries before its first mistake: taking, for every operation,
    any entry of any mutant that passes its group still leaves operations without a right equation."""
    tables = [m.fn() for m in mutants_for(nb01.EQUATIONS.id)]
    right = set()
    for name in nb01.OPERATIONS:
        for equation in {t[name] for t in tables if name in t}:
            report = nb01.EQUATIONS.run(lambda: {name: equation}, cuda_available=False)
            if any(o.title.startswith(f"{name}:") and o.status == PASS for o in report.outcomes):
                right.add(name)
    assert right and set(nb01.OPERATIONS) - right


def test_a_patch_that_changes_nothing_gives_no_answer():
    """A learner who builds a 'mutant' of the library's stage with an edit that changes nothing gets an
    error, not a working copy of the stage; and while the check runs, a patched mutant the learner made
    cannot be called at all."""
    from grader.checks.nb09_fusion_memory import EXERCISES
    from tensorcraft.compiler.passes.memory_plan import storage_lifetimes
    try:
        copy = patched("nb99_learner.copy", "copy", storage_lifetimes,
                       ("end = len(graph.nodes)", "end = len(graph.nodes)  # mine now"), hint="")
        report = EXERCISES["storage_lifetimes"].run(copy, cuda_available=False)
    finally:
        REGISTRY.pop("nb99_learner.copy", None)
    assert copy.problem and "change nothing" in copy.problem   # it raises PatchError when called
    assert report.failed and "known wrong answers" in report.failed[0].detail  # and is out of reach (checks/reach.py)
