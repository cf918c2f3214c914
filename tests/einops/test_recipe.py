"""The recipe and plan of a call: what they say, checked against what einops computes."""
import einops
import numpy as np
import pytest

from tensorcraft.einops import EinopsError
from tensorcraft.einops.recipe import make_recipe, plan_for


def _run_plan(plan, x):
    """Apply a plan by hand with numpy, step by step, as a learner would."""
    if plan.init_shape is not None:
        x = x.reshape(plan.init_shape)
    if plan.permutation is not None:
        x = x.transpose(plan.permutation)
    if plan.reduced_axes:
        x = getattr(x, plan.recipe.operation)(axis=plan.reduced_axes)
    if plan.expanded_shape is not None:
        x = np.broadcast_to(x.reshape(plan.unsqueezed_shape), plan.expanded_shape)
    if plan.final_shape is not None:
        x = x.reshape(plan.final_shape)
    return x


def test_docstring_example():
    plan = plan_for("b (h w) c -> b c h w", (5, 6, 3), h=2)
    assert plan.recipe.axes == ("b", "h", "w", "c")
    assert plan.init_shape == (5, 2, 3, 3) and plan.permutation == (0, 3, 1, 2)
    assert plan.reduced_axes == () and plan.expanded_shape is None and plan.final_shape is None
    assert str(plan) == 'rearrange "b (h w) c -> b c h w" on shape (5, 6, 3):\n  reshape (5, 2, 3, 3)\n  permute (0, 3, 1, 2)'


@pytest.mark.parametrize("pattern, shape, operation, lengths", [
    ("b (h w) c -> b c h w", (5, 6, 3), "rearrange", {"h": 2}),
    ("b c (h 2) (w 2) -> b c h w", (2, 3, 4, 6), "max", {}),
    ("b ... c -> (c b) ...", (2, 3, 4, 5), "rearrange", {}),
    ("h w -> (h h2) (w w2) k", (2, 3), "repeat", {"h2": 2, "w2": 3, "k": 2}),
    ("b (x y) -> b 1", (3, 4), "sum", {"x": 2}),
    ("a b -> a b", (3, 4), "rearrange", {}),
])
def test_a_plan_run_by_hand_gives_einops_result(pattern, shape, operation, lengths):
    x = np.random.default_rng(0).standard_normal(shape)
    plan = plan_for(pattern, shape, operation, **lengths)
    expected = (einops.reduce(x, pattern, operation, **lengths) if operation not in ("rearrange", "repeat")
                else getattr(einops, operation)(x, pattern, **lengths))
    np.testing.assert_allclose(_run_plan(plan, x), expected, rtol=1e-12)
    assert str(plan).startswith(f'{operation} "{pattern}"')


def test_recipes_are_cached_per_rank_and_plans_infer_lengths():
    first = make_recipe("b (h w) -> b h w", "rearrange", 2, ("h",))
    assert make_recipe("b (h w) -> b h w", "rearrange", 2, ("h",)) is first
    assert plan_for("b (h w) -> b h w", (2, 12), h=3).init_shape == (2, 3, 4)
    assert plan_for("b (h w) -> b h w", (2, 12), h=4).init_shape == (2, 4, 3)


def test_ellipsis_becomes_named_axes():
    recipe = make_recipe("b ... -> ... b", "rearrange", 4, ())
    assert recipe.axes == ("b", "...0", "...1", "...2")
    assert recipe.permutation == (1, 2, 3, 0)


def test_plan_errors_say_which_dimension_and_why():
    with pytest.raises(EinopsError, match=r"dimension 1, written \(h w\), has length 10, which cannot be split "
                                          r"with h=3: 10 is not divisible by 3"):
        plan_for("b (h w) -> b h w", (2, 10), h=3)
    with pytest.raises(EinopsError, match="dimension 0, written 1, has length 2, but the pattern says 1"):
        plan_for("1 a -> a", (2, 3))
