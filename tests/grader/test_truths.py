"""Ground truths kept once per grading worker (grader/checks/truths.py): a kept truth is the reference's
own answer, and a changed case or a changed check finds none (it cannot be stale)."""
from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from grader.kernel import integrity
from grader.checks import truths
from grader.checks import nb07_graph_capture as nb07
from grader.checks.nb07_graph_capture import INPUT_GUARD, REFUSAL

CHECK_SOURCE = '''
import torch
from grader.checks.exercise import Case, Exercise, Group

def reference(x):
    return x * {factor}

EXERCISE = Exercise(id="nb99_made_up.double", reference=reference,
                    public=lambda: [Group("one", [Case((torch.arange(4.0),))])],
                    hidden=lambda g: [], hint="", truth_once=True)
'''


@pytest.fixture(autouse=True)
def no_kept_truths(monkeypatch):
    monkeypatch.setattr(truths, "_known", ())
    monkeypatch.setattr(truths, "_done", set())


def _load(tmp_path, factor: int):
    """A check module written to a file, as the grader imports one."""
    path = tmp_path / "nb99_made_up.py"
    path.write_text(CHECK_SOURCE.format(factor=factor))
    spec = importlib.util.spec_from_file_location("nb99_made_up", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["nb99_made_up"] = module
    spec.loader.exec_module(module)
    return module


def _public_cases(exercise):
    return [case for group in exercise.public() for case in group.cases]


def test_kept_truths_are_dynamos_answers_on_every_public_case():
    for exercise in (REFUSAL, INPUT_GUARD):
        shared = exercise.shared_truths() if exercise.shared_truths else {}
        assert truths.remember(exercise) == len(_public_cases(exercise)) + len(shared)
        for case in _public_cases(exercise):
            kept = truths.recall(exercise, case.args)
            computed = exercise.reference(*case.args)
            if exercise is REFUSAL:
                assert kept[0] == computed[0] and torch.equal(kept[1], computed[1])
            else:
                assert kept == computed


def test_hidden_refusal_cases_read_dynamos_verdict_per_program_once_kept():
    """The kept verdicts (one per program) are Dynamo's on each hidden case's own input; a kept one is
    read, not recomputed."""
    from grader.checks.nb07_graph_capture import dynamo_breaks
    assert truths.remember(REFUSAL) == len(_public_cases(REFUSAL)) + len(REFUSAL.shared_truths())
    for group in REFUSAL.hidden(torch.Generator().manual_seed(5)):
        for case in group.cases:
            name, x = case.args
            kept = REFUSAL.reference(name, x)[0]
            assert kept == (True if name in nb07.RANDOM else dynamo_breaks(name, x)), name
    name = sorted(nb07.BREAKING)[0]
    assert truths.shared(REFUSAL, name, lambda: pytest.fail("a kept verdict was computed again")) is True


def _truth_once_exercises():
    import importlib
    for notebook in ("nb08_graph_passes", "nb09_fusion_memory", "nb11_capstone"):
        module = importlib.import_module(f"grader.checks.{notebook}")
        yield from (exercise for exercise in module.EXERCISES.values() if exercise.truth_once)


@pytest.mark.parametrize("exercise", list(_truth_once_exercises()), ids=lambda e: e.id)
def test_the_truths_kept_for_the_compiler_notebooks_are_their_references_answers_on_fresh_cases(exercise):
    """Kept in the fork server from its own cases, recalled in a kernel for the cases the kernel makes
    anew: every public case is found, equal to what its reference computes there, and two cases whose
    truths differ never share a key (a case that changed finds another truth or none, never a stale one)."""
    from grader.checks.compare import mismatch
    assert truths.remember(exercise) == len([c for c in _public_cases(exercise) if c.raises is None])
    fresh = [case for case in _public_cases(exercise) if case.raises is None]
    answers = {}
    for case in fresh:
        kept = truths.recall(exercise, case.args)
        assert kept is not truths.MISSING, f"{exercise.id}: {case.note or case.args!r} found no kept truth"
        computed = exercise.reference(*case.args)
        assert mismatch(computed, kept) is None
        key = truths.key(exercise, case.args)
        assert key not in answers or mismatch(answers[key], computed) is None
        answers[key] = computed


FORKS_AFTER_REMEMBERING = r'''
import importlib, os, signal, sys
import torch
from grader.checks import truths
for name in sys.argv[1:]:
    importlib.import_module(f"grader.checks.nb{name}")      # as the fork server has them
before = torch.get_num_threads()
truths.remember_for(sys.argv[1:])
assert truths._known, "no truth was kept"
pid = os.fork()
if pid == 0:            # a kernel forked after: its parallel regions must run, not hang
    signal.alarm(60)
    x = torch.randn(1000, 1000)
    (x @ x).sum(), torch.randn(1 << 22).exp().sum()
    os._exit(0)
print(os.waitpid(pid, 0)[1], before, torch.get_num_threads())
'''


def test_a_process_forked_after_the_truths_were_kept_runs_parallel_code():
    """As the fork server does: keep the compiler notebooks' truths, then fork a kernel."""
    import subprocess
    notebooks = ["07_graph_capture", "08_graph_passes", "09_fusion_memory", "10_code_generation", "11_capstone"]
    done = subprocess.run([sys.executable, "-c", FORKS_AFTER_REMEMBERING, *notebooks], capture_output=True, text=True,
                          timeout=300)
    status, before, after = done.stdout.split()
    assert status == "0", "the forked process hung or failed in a parallel region"
    assert after == before, f"remembering left torch's number of threads changed ({before} -> {after})"


def test_a_changed_case_finds_no_truth():
    truths.remember(INPUT_GUARD)
    (calls,) = _public_cases(INPUT_GUARD)[0].args
    x, k = calls[0]
    assert truths.recall(INPUT_GUARD, ([(x.clone(), k), *calls[1:]],)) is not truths.MISSING   # same content
    changed = {
        "values": (x + 1, k),
        "dtype": (x.double(), k),
        "strides": (x.t().contiguous().t(), k),
        "requires_grad": (x.clone().requires_grad_(), k),
        "a plain value": (x, k + 1),
        "its type": (x, float(k)),
    }
    for what, call in changed.items():
        assert truths.recall(INPUT_GUARD, ([call, *calls[1:]],)) is truths.MISSING, what


def test_storage_shared_between_arguments_is_part_of_the_case():
    x = torch.randn(3)
    assert truths.key(REFUSAL, ("arithmetic", x)) == truths.key(REFUSAL, ("arithmetic", x.clone()))
    assert truths.key(INPUT_GUARD, ([(x, 2), (x, 2)],)) != truths.key(INPUT_GUARD, ([(x, 2), (x.clone(), 2)],))


def test_a_changed_check_finds_no_truth(tmp_path):
    exercise = _load(tmp_path, factor=2).EXERCISE
    assert truths.remember(exercise) == 1
    (case,) = _public_cases(exercise)
    assert torch.equal(truths.recall(exercise, case.args), torch.arange(4.0) * 2)
    changed = _load(tmp_path, factor=3).EXERCISE       # the check's source edited since the truth was kept
    assert truths.recall(changed, case.args) is truths.MISSING
    assert torch.equal(changed._expected(case, case.args), torch.arange(4.0) * 3)


def test_the_check_reads_a_kept_truth_instead_of_calling_the_reference(tmp_path, monkeypatch):
    exercise = _load(tmp_path, factor=2).EXERCISE
    truths.remember(exercise)
    (case,) = _public_cases(exercise)
    monkeypatch.setattr(exercise, "reference", lambda x: pytest.fail("the reference was called"))
    monkeypatch.setattr(truths, "_source_digest", lambda e: truths.hashlib.sha256(
        (tmp_path / "nb99_made_up.py").read_bytes()).hexdigest())
    first = exercise._expected(case, case.args)
    first.add_(1)                                   # each recall is a fresh copy
    assert torch.equal(exercise._expected(case, case.args), torch.arange(4.0) * 2)


def test_remember_for_a_notebook_leaves_the_random_generator_and_dynamos_counters_alone():
    from torch._dynamo.utils import counters
    state = torch.random.get_rng_state()
    truths.remember_for(["07_graph_capture"])
    assert torch.equal(torch.random.get_rng_state(), state)
    assert not counters
    kept = len(truths._known)
    assert kept == len(_public_cases(REFUSAL)) + len(REFUSAL.shared_truths()) + len(_public_cases(INPUT_GUARD))
    truths.remember_for(["07_graph_capture"])       # once per notebook
    assert len(truths._known) == kept


def test_replacing_the_kept_truths_is_a_change_of_the_grading_code():
    truths.remember(REFUSAL)
    before = integrity.snapshot()
    truths._known = truths._known[:1]
    after = integrity.snapshot()
    assert [name for name in before if before[name] != after.get(name)] == ["grader.checks.truths._known"]
