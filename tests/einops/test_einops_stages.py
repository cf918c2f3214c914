"""The einops stages a learner rewrites are called by the library's own pipeline, and can be substituted.

Ground truth is einops itself; a substitute that records its calls proves that the pipeline ran it.
"""
import einops
import numpy as np
import pytest
import torch

import tensorcraft as tc
from tensorcraft import stages
from tensorcraft.einops import pattern, recipe
from tensorcraft.einops.layers import Rearrange, Reduce

CASES = [  # (pattern, shape, lengths)
    ("b c h w -> b (h w) c", (2, 3, 4, 5), {}),
    ("b (h w) c -> b c h w", (2, 12, 3), {"h": 4}),
    ("(a b) ... -> ... (b a)", (6, 2, 3), {"a": 2}),
]


def recording(library_fn, log):
    def substitute(*args, **kwargs):
        log.append(args[0])
        return library_fn(*args, **kwargs)
    return substitute


def test_the_einops_stages_are_declared():
    assert {"parse_expression", "make_recipe", "make_plan", "rearrange"} <= set(stages.stage_names())


@pytest.mark.parametrize("name, module", [("parse_expression", pattern), ("make_recipe", recipe),
                                          ("make_plan", recipe), ("rearrange", tc.einops.ops)])
@pytest.mark.parametrize("text, shape, lengths", CASES)
def test_a_substituted_stage_is_called_by_rearrange_and_undone_after(name, module, text, shape, lengths):
    x = torch.randn(shape)
    tc.rearrange(x, text, **lengths)  # the library's plan is in the caches now
    log = []
    with tc.substitute(**{name: recording(getattr(module, name).library, log)}):
        got = tc.rearrange(x, text, **lengths)
    assert log, f"the pipeline never called the substitute for {name}"
    assert torch.equal(got, einops.rearrange(x, text, **lengths))
    calls = len(log)
    tc.rearrange(x, text, **lengths)
    assert len(log) == calls


@pytest.mark.parametrize("text, shape, lengths", CASES)
def test_the_rearrange_layer_in_a_sequential_runs_a_substituted_rearrange(text, shape, lengths):
    model = torch.nn.Sequential(Rearrange(text, **lengths), torch.nn.Identity())
    x = torch.randn(shape)
    log = []

    def reversed_rearrange(tensor, text, **lengths):  # a wrong stage: the layer's output shows it ran
        log.append(text)
        return einops.rearrange(tensor, text, **lengths).flip(0)

    with tc.substitute(rearrange=reversed_rearrange):
        assert torch.equal(model(x), einops.rearrange(x, text, **lengths).flip(0))
    assert log == [text]
    assert torch.equal(model(x), einops.rearrange(x, text, **lengths))


def test_reduce_and_repeat_plan_through_the_substituted_stages_too():
    x = np.arange(24.0).reshape(2, 3, 4)
    log = []
    with tc.substitute(make_plan=recording(recipe.make_plan.library, log)):
        reduced = tc.reduce(x, "b c (h 2) -> b c h", "max")
        layer = Reduce("b c h -> b c", "mean")(torch.from_numpy(x))
        repeated = tc.repeat(x, "b c h -> b c h r", r=2)
    assert len(log) == 3
    np.testing.assert_array_equal(reduced, einops.reduce(x, "b c (h 2) -> b c h", "max"))
    torch.testing.assert_close(layer, einops.reduce(torch.from_numpy(x), "b c h -> b c", "mean"))
    np.testing.assert_array_equal(repeated, einops.repeat(x, "b c h -> b c h r", r=2))


def test_a_substituted_parser_is_called_although_the_recipe_was_cached():
    recipe.make_recipe("a b -> b a", "rearrange", 2, ())
    log = []
    with tc.substitute(parse_expression=recording(pattern.parse_expression.library, log)):
        recipe.make_recipe("a b -> b a", "rearrange", 2, ())
    assert log == ["a b ", " b a"]


def test_outside_a_block_the_recipe_cache_still_answers():
    first = recipe.make_recipe("a (b c) -> a b c", "rearrange", 2, ("b",))
    assert recipe.make_recipe("a (b c) -> a b c", "rearrange", 2, ("b",)) is first


def test_an_error_from_a_substitute_reaches_the_caller_and_the_library_comes_back():
    def broken_plan(recipe, shape, lengths):
        raise einops.EinopsError("learner's plan refuses")

    x = torch.zeros(2, 6)
    with pytest.raises(einops.EinopsError, match="learner's plan refuses"):
        with tc.substitute(make_plan=broken_plan):
            tc.rearrange(x, "a (b c) -> a b c", b=2)
    assert tc.rearrange(x, "a (b c) -> a b c", b=2).shape == (2, 2, 3)


def test_library_errors_are_unchanged_by_the_stage_wrappers():
    with pytest.raises(tc.EinopsError, match="not divisible"):
        tc.rearrange(torch.zeros(2, 7), "a (b c) -> a b c", b=2)
    with pytest.raises(tc.EinopsError, match="appears twice"):
        tc.rearrange(torch.zeros(2, 2), "a a -> a")
