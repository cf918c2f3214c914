"""rearrange / reduce / repeat against einops 0.8.2 on generated patterns, shapes and corruptions.

Every case runs through einops and through ours. Either both return, with the same shape, dtype and
values (bit for bit: both call the same backend functions), or einops raises and we raise EinopsError.
"""
import einops
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorcraft
from tensorcraft.einops import EinopsError, parse_shape, rearrange, reduce, repeat

NAMES = ["a", "b", "c", "h", "w", "t2", "x_y"]
REDUCTIONS = ["sum", "mean", "max", "min", "prod", "any", "all"]


def _render(dims) -> str:
    """dims: list of str words or lists of words (a group)."""
    return " ".join(d if isinstance(d, str) else "(" + " ".join(d) + ")" for d in dims)


@st.composite
def cases(draw, operation: str):
    """A valid (pattern, shape, axes_lengths) for `operation`, with a few variations einops allows."""
    n = draw(st.integers(0, 4))
    names = draw(st.permutations(NAMES))[:n]
    length = {name: draw(st.integers(1, 3)) for name in names}
    ellipsis_shape = draw(st.none() | st.lists(st.integers(1, 3), max_size=2))

    # Left side: the names in some order, cut into groups; maybe numbers (reduce), units, an ellipsis.
    order = list(draw(st.permutations(names)))
    left, shape, given = [], [], {}
    while order:
        size = draw(st.integers(1, min(3, len(order))))
        group, order = order[:size], order[size:]
        words = list(group)
        if operation not in ("rearrange", "repeat") and draw(st.booleans()) and draw(st.booleans()):
            words.insert(draw(st.integers(0, len(words))), str(draw(st.integers(2, 3))))
        if draw(st.integers(0, 5)) == 0:
            words.append("1")  # a 1 inside parentheses changes nothing
        lengths = [int(w) if w.isdecimal() else length[w] for w in words]
        shape.append(int(np.prod(lengths)))
        unknown = [w for w in group]
        for w in unknown[:-1] if len(words) > 1 else []:
            given[w] = length[w]  # all but one name of a composed dimension must be given
        left.append(words if len(words) > 1 or draw(st.booleans()) else words[0])
    for _ in range(draw(st.integers(0, 1))):
        at = draw(st.integers(0, len(left)))
        left.insert(at, draw(st.sampled_from(["1", "()"])))
        shape.insert(at, 1)
    if ellipsis_shape is not None:
        at = draw(st.integers(0, len(left)))
        left.insert(at, "...")
        shape[at:at] = ellipsis_shape

    # Right side: which names leave, in which order and grouping.
    if operation == "rearrange":
        kept = list(names)
    elif operation == "repeat":
        kept = list(names)
    else:
        kept = [name for name in names if draw(st.booleans())]
    out = list(draw(st.permutations(kept)))
    if operation == "repeat":
        new = [f"n{i}" for i in range(draw(st.integers(0, 2)))]
        for name in new:
            given[name] = draw(st.integers(1, 3))
            out.insert(draw(st.integers(0, len(out))), name)
        if draw(st.booleans()):
            out.insert(draw(st.integers(0, len(out))), str(draw(st.integers(2, 3))))
    keep_ellipsis = ellipsis_shape is not None and (operation in ("rearrange", "repeat") or draw(st.booleans()))
    if keep_ellipsis:
        out.insert(draw(st.integers(0, len(out))), "...")
    right = []
    while out:
        size = draw(st.integers(1, min(3, len(out))))
        group, out = out[:size], out[size:]
        right.append(group if len(group) > 1 or draw(st.integers(0, 3)) == 0 else group[0])
    for _ in range(draw(st.integers(0, 1))):
        right.insert(draw(st.integers(0, len(right))), draw(st.sampled_from(["1", "()"])))

    for name in names:  # sometimes also give a length that could be inferred
        if draw(st.integers(0, 4)) == 0:
            given[name] = length[name]
    pattern = f"{_render(left)} -> {_render(right)}"
    return pattern, tuple(shape), given


@st.composite
def corrupted(draw, operation: str):
    """A valid case, then (mostly) one mistake in the pattern, the shape or the lengths."""
    pattern, shape, given = draw(cases(operation))
    mistake = draw(st.sampled_from([
        "none", "drop_length", "wrong_length", "unknown_length", "shape_plus_one", "extra_dim",
        "fewer_dims", "swap_sides", "edit_pattern", "zero_length", "negative_length",
    ]))
    if mistake == "drop_length" and given:
        given.pop(draw(st.sampled_from(sorted(given))))
    elif mistake == "wrong_length" and given:
        given[draw(st.sampled_from(sorted(given)))] += 1
    elif mistake == "unknown_length":
        given[draw(st.sampled_from(["zz", "a", "n0", "_q"]))] = 2
    elif mistake == "shape_plus_one" and shape:
        at = draw(st.integers(0, len(shape) - 1))
        shape = shape[:at] + (shape[at] + 1,) + shape[at + 1:]
    elif mistake == "extra_dim":
        shape = shape + (draw(st.integers(1, 3)),)
    elif mistake == "fewer_dims" and shape:
        shape = shape[:-1]
    elif mistake == "swap_sides":
        left, right = pattern.split("->")
        pattern = f"{right}->{left}"
    elif mistake == "edit_pattern":
        at = draw(st.integers(0, len(pattern)))
        insert = draw(st.sampled_from(["a", " a", "(", ")", "...", " 2", " 1", "_", "..", "-", "->", " (a b)", " 0"]))
        pattern = pattern[:at] + insert + pattern[at:]
    elif mistake in ("zero_length", "negative_length") and given:
        given[draw(st.sampled_from(sorted(given)))] = 0 if mistake == "zero_length" else -1
    return pattern, shape, given


def _array(shape, dtype: str, backend: str, seed: int):
    values = np.random.default_rng(seed).standard_normal(shape)
    if dtype == "bool":
        values = values > 0
    elif dtype.startswith("int"):
        values = np.round(values * 3)
    array = np.asarray(values).astype(dtype)
    return torch.from_numpy(array) if backend == "torch" else array


def _same_outcome(ours_call, einops_call):
    """Run both; assert the same result, or einops raising and ours raising EinopsError."""
    try:
        expected = einops_call()
    except Exception as error:  # einops raised (an EinopsError, or a bare backend error)
        with pytest.raises(EinopsError):
            ours_call()
        return error
    got = ours_call()
    assert type(got) is type(expected)
    assert tuple(got.shape) == tuple(expected.shape) and got.dtype == expected.dtype
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected, strict=True)
    return None


def _check(operation, reduction, pattern, shape, given, dtype, backend):
    x = _array(shape, dtype, backend, seed=len(pattern))
    if any(isinstance(v, int) and v < 0 for v in given.values()):
        # Deliberate deviation: einops fails on a negative length in most places, but torch's expand
        # reads -1 as "keep", so einops.repeat(t, "a -> a b", b=-1) silently makes b of length 1.
        # We always refuse a negative length.
        with pytest.raises(EinopsError, match="cannot be negative"):
            {"rearrange": rearrange, "repeat": repeat}.get(operation, lambda x, p, **k: reduce(x, p, reduction, **k))(
                x, pattern, **given)
        return "negative length"
    if operation == "reduce":
        return _same_outcome(lambda: reduce(x, pattern, reduction, **given),
                             lambda: einops.reduce(x, pattern, reduction, **given))
    ours, theirs = {"rearrange": (rearrange, einops.rearrange), "repeat": (repeat, einops.repeat)}[operation]
    return _same_outcome(lambda: ours(x, pattern, **given), lambda: theirs(x, pattern, **given))


BACKENDS = ["numpy", "torch"]


@pytest.mark.parametrize("backend", BACKENDS)
@given(case=cases("rearrange"))
def test_rearrange_matches_einops(case, backend):
    assert _check("rearrange", None, *case, "float32", backend) is None  # valid cases never fail


@pytest.mark.parametrize("backend", BACKENDS)
@given(case=cases("repeat"))
def test_repeat_matches_einops(case, backend):
    assert _check("repeat", None, *case, "float64", backend) is None


@pytest.mark.parametrize("backend", BACKENDS)
@given(case=cases("reduce"), reduction=st.sampled_from(REDUCTIONS),
       dtype=st.sampled_from(["float32", "float64", "int64", "bool"]))
def test_reduce_matches_einops_for_every_reduction(case, reduction, dtype, backend):
    _check("reduce", reduction, *case, dtype, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("operation", ["rearrange", "repeat", "reduce"])
@settings(max_examples=100)
@given(data=st.data())
def test_mistakes_fail_exactly_where_einops_fails(data, operation, backend):
    pattern, shape, given = data.draw(corrupted(operation))
    reduction = data.draw(st.sampled_from(REDUCTIONS)) if operation == "reduce" else None
    _check(operation, reduction, pattern, shape, given, "float32", backend)


def test_negative_length_deviation_is_real():
    """The case the deviation above is about: einops with torch accepts it, we refuse it."""
    assert einops.repeat(torch.zeros(2), "a -> a b", b=-1).shape == (2, 1)
    with pytest.raises(EinopsError, match="b=-1: an axis length cannot be negative"):
        repeat(torch.zeros(2), "a -> a b", b=-1)


def test_callable_reduction_gets_the_tensor_and_the_reduced_axes():
    x = torch.randn(2, 3, 4)
    seen = []

    def logsumexp(tensor, axes):
        seen.append(axes)
        return torch.logsumexp(tensor, dim=axes)
    torch.testing.assert_close(reduce(x, "b (h 1) w -> w", logsumexp),
                               einops.reduce(x, "b (h 1) w -> w", logsumexp), rtol=0, atol=0)
    assert seen[0] == seen[1] == (1, 2)
    np.testing.assert_array_equal(reduce(x.numpy(), "b h w -> h", np.var), einops.reduce(x.numpy(), "b h w -> h", np.var))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_of_tensors_is_stacked_first(backend):
    tensors = [_array((2, 3), "float32", backend, seed) for seed in range(4)]
    for pattern in ["n h w -> h (n w)", "n ... -> ... n"]:
        _same_outcome(lambda: rearrange(tensors, pattern), lambda: einops.rearrange(tensors, pattern))
    _same_outcome(lambda: reduce(tensors, "n h w -> h", "max"), lambda: einops.reduce(tensors, "n h w -> h", "max"))
    with pytest.raises(EinopsError, match="empty"):
        rearrange([], "n -> n")
    with pytest.raises(EinopsError, match="cannot stack"):
        rearrange([tensors[0], tensors[0][:1]], "n h w -> n h w")


def test_views_are_returned_where_einops_returns_them():
    x = torch.randn(4, 6)
    assert rearrange(x, "a b -> b a")._base is x and repeat(x, "a b -> a b c", c=2)._base is x
    assert rearrange(x, "a b -> a b") is x is einops.rearrange(x, "a b -> a b")
    y = np.zeros((2, 3))
    assert repeat(y, "a b -> a b c", c=2).flags.writeable  # numpy's repeat copies, as einops' np.tile


@pytest.mark.parametrize("call, expected", [
    (lambda x: rearrange(x, "b (h w) -> b h w", h=4), ['rearrange(x, "b (h w) -> b h w", h=4)',
                                                      "shape (2, 6)", "6 is not divisible by 4"]),
    (lambda x: rearrange(x, "b c -> c"), ["axis b", "left side only"]),
    (lambda x: rearrange(x, "b c -> b c d"), ["axis d", "right side only"]),
    (lambda x: rearrange(x, "b b -> b"), ["appears twice"]),
    (lambda x: rearrange(x, "b ... c ... -> b"), ["more than one ellipsis"]),
    (lambda x: reduce(x, "b c -> b", "median"), ["unknown reduction 'median'"]),
    (lambda x: repeat(x, "b c -> b c n"), ["new axis n needs a length", "n=..."]),
    (lambda x: rearrange(x, "b c d -> b c d"), ["input has 2 dimensions", "left side names 3"]),
    (lambda x: rearrange(x, "(b1 b2) c -> b1 b2 c"), ["cannot infer the lengths of b1, b2"]),
    (lambda x: rearrange(x, "b c -> c b", b=3), ["written b, has length 2", "b=3 makes 3"]),
    (lambda x: rearrange(x, "b c -> c b", q=3), ["keyword q=... names an axis that the pattern does not use"]),
    (lambda x: reduce(x.long(), "b c -> b", "mean"),
     ['reduce(x, "b c -> b", \'mean\') on input of shape (2, 6)', "mean needs floating-point values", "torch.int64"]),
    (lambda x: rearrange(x, "b c -> b c 2"), ["no numeric axis other than 1"]),
    (lambda x: rearrange(3, "b c -> b c"), ["expected a numpy array or a torch tensor, got int"]),
    (lambda x: reduce(x, "b c -> b", ["sum"]), ["unknown reduction ['sum']"]),
    (lambda x: rearrange(x, "b (c d) -> b c d", c=[2]), ["c=[2]: an axis length must be an integer"]),
    (lambda x: rearrange(x, "b (c d) -> b c d", c=2.0), ["c=2.0: an axis length must be an integer"]),
])
def test_error_messages_name_call_shape_and_reason(call, expected):
    x = torch.zeros(2, 6)
    with pytest.raises(EinopsError) as caught:
        call(x)
    for fragment in expected:
        assert fragment in str(caught.value)


def test_min_and_max_over_an_empty_axis_fail_like_einops():
    x = np.zeros((3, 0))
    with pytest.raises(ValueError):
        einops.reduce(x, "a b -> a", "max")
    with pytest.raises(EinopsError, match="length 0"):
        reduce(x, "a b -> a", "max")
    np.testing.assert_array_equal(reduce(x, "a b -> a", "sum"), einops.reduce(x, "a b -> a", "sum"))


def test_public_names_resolve_to_these_functions():
    assert tensorcraft.rearrange is rearrange and tensorcraft.EinopsError is EinopsError
    assert tensorcraft.parse_shape is parse_shape


@pytest.mark.parametrize("backend", BACKENDS)
@given(shape=st.lists(st.integers(1, 4), max_size=5),
       words=st.lists(st.sampled_from(["a", "b", "_", "1", "2", "3", "...", "(c)", "(c d)", "()", "c"]), max_size=5))
def test_parse_shape_matches_einops(shape, words, backend):
    x = _array(tuple(shape), "float32", backend, 0)
    pattern = " ".join(words)
    try:
        expected = einops.parse_shape(x, pattern)
    except Exception:
        with pytest.raises(EinopsError):
            parse_shape(x, pattern)
        return
    assert parse_shape(x, pattern) == expected


@pytest.mark.cuda
@pytest.mark.parametrize("pattern, kind, lengths", [
    ("b (h w) x c -> b c x h w", "rearrange", {"h": 2}), ("b h w c -> b c", "mean", {}),
    ("b h w c -> b h w c k", "repeat", {"k": 3}), ("b (h 2) w c -> b h w", "max", {}),
])
def test_cuda_tensors_match_einops(pattern, kind, lengths):
    x = torch.randn(2, 4, 3, 5, device="cuda")
    if kind == "rearrange":
        got, expected = rearrange(x, pattern, **lengths), einops.rearrange(x, pattern, **lengths)
    elif kind == "repeat":
        got, expected = repeat(x, pattern, **lengths), einops.repeat(x, pattern, **lengths)
    else:
        got, expected = reduce(x, pattern, kind, **lengths), einops.reduce(x, pattern, kind, **lengths)
    assert got.device == x.device
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
