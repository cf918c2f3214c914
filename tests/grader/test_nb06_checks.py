"""Notebook 06's checks: rearrange stays allowed, delegating to reduce/repeat is refused, and the
learner's reduce really runs inside tensorcraft's Reduce layer."""
import einops
import torch

import tensorcraft
from grader.checks.nb06_reduce_repeat_pack import EXERCISES

REDUCE, REPEAT = EXERCISES["reduce"], EXERCISES["repeat"]
METHODS = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin", "prod": "prod"}


def reduce_with_einops_rearrange(x, pattern, reduction, **axes_lengths):
    """A correct answer that uses einops.rearrange (allowed) and names its own numbers."""
    left, right = pattern.split("->")
    words, numbers = [], {}
    for word in left.replace("(", " ( ").replace(")", " ) ").split():
        if word.isdigit() and word != "1":
            numbers[f"n{len(numbers)}"] = int(word)
            word = f"n{len(numbers) - 1}"
        words.append(word)
    left = " ".join(words).replace("( ", "(").replace(" )", ")")
    names = lambda side: [w for w in side.replace("(", " ").replace(")", " ").split() if w.isidentifier()]
    reduced = [name for name in names(left) if name not in names(right)] + (
        ["..."] if "..." in left and "..." not in right else [])
    if not reduced:
        return einops.rearrange(x, f"{left} -> {right}", **axes_lengths, **numbers)
    y = einops.rearrange(x, f"{left} -> {right} ({' '.join(reduced)})", **axes_lengths, **numbers)
    return getattr(y, METHODS[reduction])(dim=-1)


def test_an_answer_built_on_einops_rearrange_passes_public_and_hidden():
    assert not REDUCE.run(reduce_with_einops_rearrange).failed
    assert not REDUCE.run(reduce_with_einops_rearrange, hidden=True, seed=3).failed


def test_delegating_to_reduce_or_repeat_is_refused():
    for delegate in (einops.reduce, tensorcraft.reduce):
        report = REDUCE.run(lambda x, p, r, **k: delegate(x, p, r, **k))
        assert report.failed and "asks you to do without" in report.failed[0].detail
    report = REPEAT.run(lambda x, p, **k: einops.repeat(x, p, **k))
    assert report.failed and "asks you to do without" in report.failed[0].detail


def test_the_learners_reduce_is_called_by_the_reduce_layer():
    calls = []

    def spy(x, pattern, reduction, **axes_lengths):
        calls.append(pattern)
        return reduce_with_einops_rearrange(x, pattern, reduction, **axes_lengths)

    x = torch.randn(2, 3, 4, 4)
    got = REDUCE.call(spy, x, "b c (h 2) (w 2) -> b c h w", "max", {})
    assert calls == ["b c (h 2) (w 2) -> b c h w"]
    torch.testing.assert_close(got, einops.reduce(x, "b c (h 2) (w 2) -> b c h w", "max"))


def test_a_head_that_pools_without_reduce_layers_fails():
    from tensorcraft.einops.layers import Reduce

    class GlobalMean(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=(2, 3))

    def head(channels, hidden, classes):
        return torch.nn.Sequential(Reduce("b c (h 2) (w 2) -> b c h w", "max"), torch.nn.Conv2d(channels, hidden, 1),
                                   torch.nn.ReLU(), GlobalMean(), torch.nn.Linear(hidden, classes))

    report = EXERCISES["make_head"].run(head, cuda_available=False)
    assert report.failed and "holds 1 Reduce layer" in report.text()


def test_raising_einops_own_not_implemented_error_for_an_integer_mean_passes():
    """The statement asks an integer mean to raise as einops does: einops' own NotImplementedError (a
    message, not the release's bare stub) is a right answer, never "replace raise NotImplementedError()"."""
    def reduce_raising_as_einops(x, pattern, reduction, **axes_lengths):
        if reduction == "mean" and not x.is_floating_point():
            raise NotImplementedError("reduce_mean is not available for non-floating tensors")
        return reduce_with_einops_rearrange(x, pattern, reduction, **axes_lengths)
    assert not REDUCE.run(reduce_raising_as_einops, cuda_available=False).failed
    assert not REDUCE.run(reduce_raising_as_einops, hidden=True, seed=3, cuda_available=False).failed

    def stub(x, pattern, reduction, **axes_lengths):
        raise NotImplementedError()
    assert all("still raises NotImplementedError" in o.detail for o in REDUCE.run(stub, cuda_available=False).failed)


def test_the_checks_reference_head_is_no_answer_under_any_name():
    """The checks module is importable from the notebook and holds the architecture: handed in, called by
    name or kept in a dict, reference_head fails, naming it; the check itself still builds it."""
    from grader.checks import nb06_reduce_repeat_pack as checks
    kept = {"head": checks.reference_head}
    answers = [checks.reference_head, lambda c, h, k: checks.reference_head(c, h, k), lambda c, h, k: kept["head"](c, h, k)]
    for answer in answers:
        report = EXERCISES["make_head"].run(answer, cuda_available=False)
        assert report.failed and "reference_head" in report.failed[0].detail
    assert isinstance(checks.reference_head(3, 4, 5), torch.nn.Sequential)   # outside a check it is as it was
