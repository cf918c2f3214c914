"""Guards: reuse while inputs match, recompile with the failed guard named, eager past the limit."""
from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorcraft
from tensorcraft.compiler.examples import MLP

from available_backends import backend_params


def _f(x):
    return (x * 2).sin() + 1


def test_same_inputs_hit_the_cache():
    compiled = tensorcraft.compile(_f, backend="python")
    for _ in range(4):
        compiled(torch.randn(3, 4))
    assert (compiled.stats.compiles, compiled.stats.cache_hits, compiled.stats.recompiles) == (1, 3, [])


@pytest.mark.parametrize("second, words", [
    (torch.randn(5, 4), "input x: shape [5, 4] != [3, 4]"),
    (torch.randn(3, 4, dtype=torch.float64), "input x: dtype torch.float64 != torch.float32"),
    (torch.randn(4, 3).t(), "input x: stride [1, 3] != [4, 1]"),
    (torch.randn(3, 4).requires_grad_(), "input x: requires_grad True != False"),
])
def test_a_changed_input_recompiles_and_names_the_guard(second, words):
    compiled = tensorcraft.compile(_f, backend="python")
    first = torch.randn(3, 4)
    torch.testing.assert_close(compiled(first), _f(first))
    compiled(first)
    torch.testing.assert_close(compiled(second), _f(second))
    torch.testing.assert_close(compiled(second), _f(second))
    assert compiled.stats.compiles == 2 and compiled.stats.recompiles == [words]
    assert words in compiled.explain()


def test_non_tensor_arguments_are_guarded_by_value():
    g = lambda x, k: x * k  # noqa: E731
    compiled = tensorcraft.compile(g, backend="python")
    x = torch.randn(3)
    compiled(x, 2), compiled(x, 2)
    torch.testing.assert_close(compiled(x, 5), x * 5)
    assert compiled.stats.recompiles == ["input k: value 5 != 2"]


def test_grad_mode_and_training_mode_are_guarded():
    model = MLP().eval()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(2, 16)
    with torch.no_grad():
        compiled(x)
    compiled(x)
    model.train()
    compiled(x)
    assert compiled.stats.recompiles[0].startswith("grad mode changed")
    assert compiled.stats.recompiles[1].startswith("training mode changed")


def test_folded_parameters_are_guarded_by_their_version():
    model = MLP().eval()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(2, 16)
    with torch.no_grad():
        compiled(x), compiled(x)
        model.fc1.weight.mul_(2)  # what an optimizer step does
        torch.testing.assert_close(compiled(x), model(x))
    assert compiled.stats.recompiles == ["module tensor fc1.weight changed in place since it was folded into constants"]


def test_past_the_cache_limit_runs_eagerly_with_a_warning():
    compiled = tensorcraft.compile(_f, backend="python", cache_limit=3)
    for n in range(1, 4):
        compiled(torch.randn(n))
    x = torch.randn(7)
    with pytest.warns(RuntimeWarning, match=r"cache limit \(3\) reached; running eagerly"):
        torch.testing.assert_close(compiled(x), _f(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        compiled(torch.randn(8))
    for n in range(9, 30):
        compiled(torch.randn(n))
    assert compiled.stats.compiles == 3 and compiled.stats.eager_calls == 23
    assert len(compiled.stats.fallbacks) == 1  # logged once, not once per call (a long loop would grow it)
    assert "cache limit (3) reached" in compiled.explain()
    compiled(torch.randn(2))  # an existing entry still serves its inputs
    assert compiled.stats.cache_hits == 1


def test_default_cache_limit_is_torchs():
    compiled = tensorcraft.compile(_f, backend="python")
    with pytest.warns(RuntimeWarning):
        for n in range(1, 11):
            compiled(torch.randn(n))
    assert compiled.stats.compiles == 8 and compiled.stats.eager_calls == 2


def test_data_dependent_control_flow_entry_is_reused_eagerly():
    def f(x):
        return x * 2 if x.sum() > 0 else x - 1
    compiled = tensorcraft.compile(f, backend="python")
    pos, neg = torch.ones(3), -torch.ones(3)
    torch.testing.assert_close(compiled(pos), pos * 2)
    torch.testing.assert_close(compiled(neg), neg - 1)  # same guards: the eager entry runs it
    assert compiled.stats.eager_calls == 1 and compiled.stats.compiles == 0
    assert "EAGER" in compiled.explain() and "Tensor.__bool__" in compiled.explain()


def test_replacing_a_parameters_data_or_the_parameter_recompiles():
    model = MLP().eval()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(2, 16)
    with torch.no_grad():
        compiled(x)
        model.fc2.bias.data = torch.ones(8)
        torch.testing.assert_close(compiled(x), model(x))
        model.fc1.weight = torch.nn.Parameter(torch.zeros(32, 16))
        torch.testing.assert_close(compiled(x), model(x))
    assert compiled.stats.recompiles == [
        "module tensor fc2.bias now holds different memory (.data was replaced or moved)",
        "module tensor fc1.weight was replaced by another tensor"]


@settings(max_examples=25)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3), st.sampled_from([torch.float32, torch.float64]),
                          st.booleans()), min_size=1, max_size=12))
def test_any_call_sequence_gives_eager_results_and_one_entry_per_signature(calls):
    compiled = tensorcraft.compile(_f, backend="python", cache_limit=4)
    signatures: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for rows, cols, dtype, transpose in calls:
            x = torch.randn(cols, rows, dtype=dtype).t() if transpose else torch.randn(rows, cols, dtype=dtype)
            torch.testing.assert_close(compiled(x), _f(x))
            key = (tuple(x.shape), x.stride(), x.dtype)
            if key not in signatures:
                signatures.append(key)
    assert compiled.stats.compiles == min(len(signatures), 4)
    assert len(compiled.stats.recompiles) == compiled.stats.compiles - 1
    assert compiled.stats.calls == compiled.stats.compiles + compiled.stats.cache_hits + compiled.stats.eager_calls


def _conv_bn_relu() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval()


def test_folded_parameters_changed_without_a_version_bump_recompile():
    """`p.data.mul_` and batchnorm's running-stat update in training mode leave `_version` alone."""
    model = _conv_bn_relu()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        compiled(x)
        compiled(x)  # the folded entry runs
        model[0].weight.data.mul_(2)
        torch.testing.assert_close(compiled(x), model(x))
        model.train()
        compiled(x)  # eager (batchnorm updates its statistics), and the statistics change
        model.eval()
        torch.testing.assert_close(compiled(x), model(x))
    assert "holds other values than when it was folded" in compiled.explain()


class _Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = 2.0
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x).relu() * self.scale


SHIFT = 1


def _shifted(x):
    return (x * 2).sin() + SHIFT


def test_plain_python_values_read_in_forward_are_guarded():
    model = _Scaled()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3, 4)
    compiled(x), compiled(x)
    model.scale = 3.0
    torch.testing.assert_close(compiled(x), model(x))
    compiled.scale = 4  # through the compiled module, and an int: another type is another value
    torch.testing.assert_close(compiled(x), model(x))
    assert compiled.stats.recompiles == ["module attribute scale is 3.0, was 2.0",
                                         "module attribute scale is 4, was 3.0"]


def test_globals_and_closure_variables_read_by_the_function_are_guarded():
    global SHIFT
    compiled = tensorcraft.compile(_shifted, backend="python")
    x = torch.randn(3, 4)
    try:
        compiled(x), compiled(x)
        SHIFT = 5
        torch.testing.assert_close(compiled(x), _shifted(x))
    finally:
        SHIFT = 1
    factor = 2.0

    def scaled(x):
        return (x * factor).exp()
    compiled = tensorcraft.compile(scaled, backend="python")
    compiled(x), compiled(x)
    factor = 0.5
    torch.testing.assert_close(compiled(x), scaled(x))
    assert compiled.stats.recompiles == ["closure variable factor is 0.5, was 2.0"]


def test_adding_or_removing_a_module_hook_recompiles():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3, 4)
    handle = model[0].register_forward_hook(lambda module, inputs, output: output * 2)
    with torch.no_grad():
        compiled(x)
        torch.testing.assert_close(compiled(x), model(x))  # the hook's torch calls are in the graph
        handle.remove()
        torch.testing.assert_close(compiled(x), model(x))
        model[1].register_forward_pre_hook(lambda module, inputs: (inputs[0] + 5,))
        torch.testing.assert_close(compiled(x), model(x))
    assert [why.split(" (")[0] for why in compiled.stats.recompiles] == [
        "forward hooks of module 0", "forward pre hooks of module 1"]


def test_swapping_a_submodule_recompiles():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled(x), compiled(x)
        model[1] = torch.nn.Tanh()  # no parameters change, the code does
        torch.testing.assert_close(compiled(x), model(x))
    assert len(compiled.stats.recompiles) == 1
    assert compiled.stats.recompiles[0].startswith("the module's submodules (names and ids) is ")


W = torch.arange(16.0).reshape(4, 4)


def _times_w_transposed(x):
    return x @ W.t()  # W.t() is folded into a constant at compile time


def test_globals_that_are_objects_are_guarded_by_identity_and_folded_constants_by_value():
    global W
    compiled = tensorcraft.compile(_times_w_transposed, backend="python")
    x = torch.randn(3, 4)
    original = W
    try:
        compiled(x), compiled(x)
        W.data.mul_(2)  # no version bump: the folded W.t() would be stale
        torch.testing.assert_close(compiled(x), _times_w_transposed(x))
        W = torch.ones(4, 4)  # another object under the same name
        torch.testing.assert_close(compiled(x), _times_w_transposed(x))
    finally:
        W = original
    assert compiled.stats.recompiles == ["a captured constant tensor[4, 4] holds other values than when it was folded",
                                         "global W now refers to another object"]


def test_a_helper_function_rebound_recompiles():
    compiled = tensorcraft.compile(lambda x: _helper(x) * 2, backend="python")
    x = torch.randn(3)
    global _helper
    original = _helper
    try:
        compiled(x), compiled(x)
        _helper = torch.cos
        torch.testing.assert_close(compiled(x), torch.cos(x) * 2)
    finally:
        _helper = original


def _helper(x):
    return torch.sin(x)


class _Box:
    def __init__(self, t):
        self.t = t


def test_arguments_that_hold_state_run_eagerly_and_functions_are_guarded_by_identity():
    np = pytest.importorskip("numpy")
    x = torch.randn(3)
    compiled = tensorcraft.compile(lambda a, arr: a * torch.as_tensor(arr, dtype=a.dtype), backend="python")
    array = np.ones(3)
    compiled(x, array)
    array[:] = 2.0  # same object, other contents: eager sees them
    torch.testing.assert_close(compiled(x, array), x * 2)
    torch.testing.assert_close(compiled(x, np.full(3, 3.0)), x * 3)  # used to raise: ambiguous truth value
    assert "argument arr is a ndarray" in compiled.explain()

    compiled = tensorcraft.compile(lambda a, box: a * box.t, backend="python")
    box = _Box(torch.ones(3))
    compiled(x, box)
    box.t = torch.full((3,), 5.0)
    torch.testing.assert_close(compiled(x, box), x * 5)

    compiled = tensorcraft.compile(lambda a, act: act(a) * 2, backend="python")
    for act in (torch.relu, torch.relu, torch.sigmoid):
        torch.testing.assert_close(compiled(x, act), act(x) * 2)
    assert compiled.stats.compiles == 2 and compiled.stats.recompiles == ["input act: another "
                                                                          "builtin_function_or_method object"]


class _Configured(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act, self.cfg, self.sizes = torch.relu, {"k": 2.0}, [1, 2]

    def forward(self, x):
        return self.act(x) * self.cfg["k"] + len(self.sizes)


def test_module_attributes_that_are_objects_or_containers_are_guarded():
    model = _Configured()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3)
    compiled(x), compiled(x)
    for change in (lambda: setattr(model, "act", torch.sigmoid), lambda: model.cfg.update(k=5.0),
                   lambda: model.sizes.append(3)):
        change()
        torch.testing.assert_close(compiled(x), model(x))
    assert compiled.stats.recompiles == ["module attribute act now refers to another object",
                                         "module attribute cfg is {'k': 5.0}, was {'k': 2.0}",
                                         "module attribute sizes is [1, 2, 3], was [1, 2]"]


_GLOBAL_DROPOUT = torch.nn.Dropout(0.5).eval()


def _through_global_dropout(x):
    return _GLOBAL_DROPOUT(x) * 2


def test_a_submodule_or_a_global_module_switched_to_training_recompiles():
    x = torch.randn(1000)
    compiled = tensorcraft.compile(_through_global_dropout, backend="python")
    try:
        compiled(x), compiled(x)
        _GLOBAL_DROPOUT.train()
        assert (compiled(x) == 0).any()  # dropout applies again (a replay would never zero anything)
    finally:
        _GLOBAL_DROPOUT.eval()
    assert compiled.stats.recompiles == ["attribute training of global _GLOBAL_DROPOUT is True, was False"]

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).eval()
    compiled = tensorcraft.compile(model, backend="python")
    with torch.no_grad():
        compiled(x[:400].view(100, 4)), compiled(x[:400].view(100, 4))
        model[1].train()  # only the submodule: the top-level flag stays False
        assert (compiled(x[:400].view(100, 4)) == 0).any()
    assert compiled.stats.recompiles == ["module attribute 1.training is True, was False"]


class _HoldsTensorsInContainers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tensors, self.named = [torch.ones(3)], {"a": torch.ones(3)}

    def forward(self, x):
        return x * self.tensors[0] + self.named["a"]


def test_containers_of_tensors_in_module_attributes_are_guarded_item_by_item():
    model = _HoldsTensorsInContainers()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3)
    compiled(x), compiled(x)
    model.tensors[0] = torch.full((3,), 5.0)  # same list, another tensor in it
    torch.testing.assert_close(compiled(x), model(x))
    model.named["a"] = torch.full((3,), 7.0)
    torch.testing.assert_close(compiled(x), model(x))
    assert compiled.stats.recompiles == ["module attribute tensors holds other objects than at capture",
                                         "module attribute named holds other objects than at capture"]


class _LinearThenChain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return ((self.linear(x) * 2).exp() + 1).sum(-1)


@pytest.mark.parametrize("backend", [p for p in backend_params() if p.values[0] != "triton"])
def test_autocast_is_guarded(backend):
    """Under autocast linear returns bfloat16: a kernel built for float32 crashed (c) or the
    result came back float32 (python)."""
    model = _LinearThenChain()
    compiled = tensorcraft.compile(model, backend=backend)
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled(x), compiled(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            compiled(x)
            torch.testing.assert_close(compiled(x), model(x))
        torch.testing.assert_close(compiled(x), model(x))
    assert compiled.stats.recompiles == ["autocast changed: autocast on (cpu bfloat16), was autocast off"]


def test_the_default_dtype_is_guarded():
    fn = lambda x: x + torch.ones(3)  # noqa: E731  (torch.ones follows the default dtype)
    compiled = tensorcraft.compile(fn, backend="python")
    x = torch.randn(3)
    compiled(x), compiled(x)
    before = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        torch.testing.assert_close(compiled(x), fn(x))
    finally:
        torch.set_default_dtype(before)
    assert compiled.stats.recompiles == ["default dtype changed: torch.float64, was torch.float32"]


def test_a_compiled_bound_forward_guards_its_modules_attributes():
    model = _Scaled()
    compiled = tensorcraft.compile(model.forward, backend="python")
    x = torch.randn(3, 4)
    with torch.no_grad():  # (with gradients, its parameters are closure tensors that need grad: eager)
        compiled(x), compiled(x)
        model.scale = 3.0
        torch.testing.assert_close(compiled(x), model(x))
    assert compiled.stats.compiles == 2
    assert compiled.stats.recompiles == ["module attribute scale is 3.0, was 2.0"]


def test_only_the_module_tensors_baked_into_the_code_are_compared_by_value():
    class Masked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.register_buffer("mask", torch.triu(torch.ones(8, 8, dtype=torch.bool), 1))

        def forward(self, x):
            return self.lin(x).masked_fill(self.mask[:4, :8], 0.0)  # the slice is folded, lin is read
    model = Masked().eval()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(4, 8)
    with torch.no_grad():
        compiled(x)
        compiled(x)
        entry = compiled._compiler.entries[0]
        compared = [name for name, copy in zip(entry.guards.param_names, entry.guards.snapshots) if copy is not None]
        assert compared == ["mask"] and compiled.compiled.optimized.baked == {"mask"}
        model.mask.data[0, 0] = True  # no version bump: only a comparison of values sees it
        torch.testing.assert_close(compiled(x), model(x))
    assert "module tensor mask holds other values" in compiled.stats.recompiles[0]


def test_a_substitute_check_input_decides_reuse_and_the_cache_stays_in_use():
    """check_input is a stage: a substitute runs inside the cache lookup, and the cache is still read
    and filled (a guard stage is the lookup itself, unlike the stages that build an entry)."""
    seen = []

    def shapes_only(name, value, remembered):  # a too-lenient guard: the dtype is not compared
        seen.append(name)
        return None if tuple(value.shape) == remembered[2] else f"input {name}: shape changed"

    compiled = tensorcraft.compile(_f, backend="python")
    with tensorcraft.substitute(check_input=shapes_only):
        compiled(torch.randn(3, 4))
        compiled(torch.randn(3, 4, dtype=torch.float64))  # reused: the substitute said so
        compiled(torch.randn(5, 4))
    assert seen == ["x", "x"] and compiled.stats.compiles == 2
    assert compiled.stats.recompiles == ["input x: shape changed"]
    compiled(torch.randn(3, 4, dtype=torch.float64))  # the library's own guard again: dtype differs
    assert compiled.stats.compiles == 3


def test_the_library_check_input_names_the_first_field_that_differs():
    from tensorcraft.compiler.guards import check_input, describe_input
    x = torch.randn(3, 4)
    assert check_input("x", torch.randn(3, 4), describe_input(x)) is None
    assert check_input("x", x.double(), describe_input(x)) == "input x: dtype torch.float64 != torch.float32"
    assert check_input("k", 2.0, describe_input(2)) == "input k: type float != int"
    assert check_input("k", True, describe_input(1)) == "input k: type bool != int"


class _ScaledNested(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = 2
        self.inner = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())

    def forward(self, x):
        return self.inner(x) * self.scale


def test_the_quick_check_of_python_values_misses_no_change_and_names_it():
    """check_guards first compares every value at once (ValuesUnchanged: object ids per dict, hook dicts
    empty, the submodule tree); any difference there sends it through the values one by one."""
    model = _ScaledNested()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3, 4)
    changes = [
        lambda: setattr(model, "scale", 2.0),  # equal, but another type: another dtype in torch
        lambda: model.inner[0]._forward_hooks.__setitem__(-1, lambda m, i, o: o + 1),  # added behind torch's back
        lambda: setattr(model.inner[0], "_forward_hooks", type(model.inner[0]._forward_hooks)()),  # another dict, empty:
        # the state of the second entry again, which the quick check cannot vouch for (another dict): a hit
        lambda: model.inner.__setitem__(1, torch.nn.Tanh()),  # a submodule deeper down
        lambda: delattr(model, "scale"),
    ]
    with torch.no_grad():
        compiled(x), compiled(x)
        for change in changes[:-1]:
            change()
            torch.testing.assert_close(compiled(x), model(x))
            torch.testing.assert_close(compiled(x), model(x))
        changes[-1]()
        with pytest.raises(AttributeError):
            compiled(x)
    assert [why.split(" is ")[0].split(" (")[0] for why in compiled.stats.recompiles] == [
        "module attribute scale", "forward hooks of module inner.0", "the module's submodules", "module attribute scale"]
    assert compiled.stats.recompiles[-1].startswith("module attribute scale is <object")  # deleted
    entry = compiled._compiler.entries[0]
    assert not entry.guards.unchanged.rest  # the quick check vouches for every value of this model


def test_a_value_reassigned_to_an_equal_object_of_the_same_type_still_hits_the_cache():
    model = _ScaledNested()
    model.scale = 2.5
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled(x), compiled(x)
        model.scale = float("2.5")  # another float object, the same value
        torch.testing.assert_close(compiled(x), model(x))
    assert compiled.stats.recompiles == [] and compiled.stats.cache_hits == 2


def test_module_tensors_are_compared_all_at_once_and_the_difference_still_named():
    model = _ScaledNested()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3, 4)
    compiled(x), compiled(x)
    model.inner[0].bias.requires_grad_(False)
    compiled(x)
    assert compiled.stats.recompiles == ["module tensor inner.0.bias: requires_grad is False, was True"]


class _EqualToAll(torch.nn.Module):
    def forward(self, x):
        return x + 1

    def __eq__(self, other):  # a module that claims to equal anything: a swap must still be seen
        return True

    __hash__ = torch.nn.Module.__hash__


def test_a_swapped_submodule_is_seen_even_when_it_claims_to_equal_the_old_one():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), _EqualToAll())
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled(x), compiled(x)
        model[1] = _EqualToAll()
        model[1].forward = lambda x: x - 1  # other code, same class
        torch.testing.assert_close(compiled(x), model(x))
    assert len(compiled.stats.recompiles) == 1
