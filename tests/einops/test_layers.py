"""Rearrange / Reduce layers against einops.layers.torch: outputs, state_dict, repr, early errors."""
import einops
import einops.layers.torch as einops_layers
import pytest
import torch

import tensorcraft.einops.layers as our_layers
from tensorcraft.einops import EinopsError
from tensorcraft.einops.layers import Rearrange, Reduce


def _model(layers_module, with_lengths=True):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        layers_module.Reduce("b c (h h2) (w w2) -> b c h w", "max", h2=2, w2=2),
        layers_module.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
        layers_module.Reduce("b n d -> b d", "mean"),
        torch.nn.Linear(32, 5),
        layers_module.Rearrange("... (k one) -> ... k one", one=1),
    )


def test_sequential_gives_einops_output_and_state_dict():
    ours, theirs = _model(our_layers), _model(einops_layers)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    for key, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[key], value, rtol=0, atol=0)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0)
    assert Rearrange("a b -> b a").state_dict() == einops_layers.Rearrange("a b -> b a").state_dict() == {}


def test_gradients_flow_as_through_einops():
    ours, theirs = _model(our_layers), _model(einops_layers)
    x = torch.randn(2, 3, 8, 8)
    ours(x).sum().backward()
    theirs(x).sum().backward()
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


@pytest.mark.parametrize("args, kwargs", [
    (("b c h w -> b (c h w)",), {}), (("b (h w) -> b h w",), {"h": 2}), (("... c -> c ...",), {}),
])
def test_repr_is_einops_repr(args, kwargs):
    assert repr(Rearrange(*args, **kwargs)) == repr(einops_layers.Rearrange(*args, **kwargs))
    pattern = args[0].replace("->", "-> 1 1 ") if "..." not in args[0] else args[0]
    assert repr(Reduce(pattern, "max", **kwargs)) == repr(einops_layers.Reduce(pattern, "max", **kwargs))


@pytest.mark.parametrize("layer, args, kwargs", [
    ("Rearrange", ("b c -> b c d",), {}),
    ("Rearrange", ("b c -> b",), {}),
    ("Rearrange", ("b (c d) -> b c d",), {}),
    ("Rearrange", ("b c -> b c",), {"q": 2}),
    ("Rearrange", ("b c",), {}),
    ("Rearrange", ("b ... c ... -> b",), {}),
    ("Reduce", ("b c -> b", "median"), {}),
    ("Reduce", ("b c -> b d", "max"), {}),
    ("Rearrange", ("b (c d) -> b c d",), {"d": 2}),   # fine
    ("Reduce", ("b ... -> b", "mean"), {}),           # fine
])
def test_pattern_errors_are_raised_at_construction_where_einops_raises(layer, args, kwargs):
    try:
        getattr(einops_layers, layer)(*args, **kwargs)
    except Exception:
        with pytest.raises(EinopsError, match="while building"):
            globals()[layer](*args, **kwargs)
        return
    globals()[layer](*args, **kwargs)


def test_shape_errors_surface_at_call_time():
    layer = Rearrange("b (h w) -> b h w", h=4)
    with pytest.raises(EinopsError, match="6 is not divisible by 4"):
        layer(torch.zeros(2, 6))
    with pytest.raises(einops.EinopsError):
        einops_layers.Rearrange("b (h w) -> b h w", h=4)(torch.zeros(2, 6))


@pytest.mark.cuda
def test_layers_on_cuda_match_einops():
    ours = _model(our_layers).cuda()
    theirs = _model(einops_layers).cuda()
    x = torch.randn(2, 3, 8, 8, device="cuda")
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0)


def test_layers_survive_pickling_and_deepcopy():
    import copy
    import pickle

    model = torch.nn.Sequential(Rearrange("b (h w) -> b h w", h=2), Reduce("b h w -> b w", "sum"))
    x = torch.randn(3, 8)
    for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert repr(clone) == repr(model)
        torch.testing.assert_close(clone(x), model(x), rtol=0, atol=0)


def test_ellipsis_layers_accept_any_rank():
    """Deliberate deviation: einops' layers prepare recipes for 8 ranks only and raise KeyError past
    them; ours build a plan for whatever rank arrives."""
    x = torch.zeros([1] * 10)
    with pytest.raises(KeyError):
        einops_layers.Rearrange("a ... -> ... a")(x)
    assert Rearrange("a ... -> ... a")(x).shape == x.shape


@pytest.mark.filterwarnings("ignore:`torch.jit.trace")
def test_jit_trace_follows_the_batch_size_without_tracer_warnings():
    import warnings

    ours = torch.nn.Sequential(Rearrange("b c h (w k) -> b (c h) w k", k=2), Reduce("b c w k -> b c", "max"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch.jit.TracerWarning)  # 20 of them before: one per shape check
        traced = torch.jit.trace(ours, torch.randn(2, 3, 4, 6))
    x = torch.randn(5, 3, 4, 8)
    expected = einops.reduce(einops.rearrange(x, "b c h (w k) -> b (c h) w k", k=2), "b c w k -> b c", "max")
    torch.testing.assert_close(traced(x), expected, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:`torch.jit.script")
def test_jit_script_accepts_a_model_holding_the_layers():
    # regression: scripting failed inside tensorcraft.einops.ops ("try blocks aren't supported")
    ours, theirs = _model(our_layers), _model(einops_layers)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(torch.jit.script(ours)(x), theirs(x), rtol=0, atol=0)


def test_the_reduce_layer_calls_the_reduce_stage_so_a_substitute_runs_inside_it():
    import tensorcraft

    calls = []

    def spy(x, pattern, reduction, **axes_lengths):
        calls.append((pattern, reduction, axes_lengths))
        return einops.reduce(x, pattern, reduction, **axes_lengths)

    layer, x = Reduce("b c (h h2) w -> b c h", "max", h2=2), torch.randn(2, 3, 4, 5)
    with tensorcraft.substitute(reduce=spy):
        out = layer(x)
    assert calls == [("b c (h h2) w -> b c h", "max", {"h2": 2})]
    torch.testing.assert_close(out, einops.reduce(x, "b c (h h2) w -> b c h", "max", h2=2))
    layer(x)
    assert len(calls) == 1  # outside the block, the library's own reduce again
