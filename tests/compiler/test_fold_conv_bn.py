"""The conv + batchnorm arithmetic (the stage fold_conv_bn) against torch's own, and the pass calling it."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.utils.fusion import fuse_conv_bn_weights

import tensorcraft
from tensorcraft.compiler.passes.conv_bn import fold_conv_bn


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.sampled_from([1, 3]), st.sampled_from([torch.float32, torch.float64]),
       st.sampled_from([1e-5, 1e-3, 0.5]), st.integers(0, 2**31 - 1))
def test_fold_conv_bn_matches_torch(out, cin, k, dtype, eps, seed):
    g = torch.Generator().manual_seed(seed)
    w, b = torch.randn(out, cin, k, k, generator=g, dtype=dtype), torch.randn(out, generator=g, dtype=dtype)
    mean, var = torch.randn(out, generator=g, dtype=dtype), torch.rand(out, generator=g, dtype=dtype) + 0.1
    gamma, beta = torch.randn(out, generator=g, dtype=dtype), torch.randn(out, generator=g, dtype=dtype)
    ours = fold_conv_bn(w, b, mean, var, gamma, beta, eps)
    theirs = fuse_conv_bn_weights(w, b, mean, var, eps, gamma, beta)
    for o, t in zip(ours, theirs):
        assert o.dtype == dtype
        torch.testing.assert_close(o, t.detach())


def _conv_bn(bias: bool, affine: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=bias), torch.nn.BatchNorm2d(4, eps=0.01, affine=affine))
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    return model.eval()


def test_the_pass_calls_the_stage_with_zeros_and_ones_for_what_the_modules_lack():
    for bias in (True, False):
        for affine in (True, False):
            model, seen = _conv_bn(bias, affine), []

            def spy(*args):
                seen.append(args)
                return fold_conv_bn.library(*args)

            compiled, x = tensorcraft.compile(model, passes=["conv_bn", "dce"]), torch.randn(2, 3, 6, 6)
            with torch.no_grad(), tensorcraft.substitute(fold_conv_bn=spy):
                got = compiled(x)
            (w, b, mean, var, gamma, beta, eps), = seen
            assert torch.equal(b, model[0].bias if bias else torch.zeros(4))
            assert torch.equal(gamma, model[1].weight if affine else torch.ones(4))
            assert torch.equal(beta, model[1].bias if affine else torch.zeros(4))
            assert eps == 0.01 and torch.equal(mean, model[1].running_mean) and torch.equal(var, model[1].running_var)
            with torch.no_grad():
                torch.testing.assert_close(got, model(x))
            assert compiled.compiled.optimized.count(op="batch_norm") == 0


def test_a_wrong_substitute_changes_what_the_compiled_model_computes():
    model, x = _conv_bn(True, True), torch.randn(1, 3, 5, 5)
    compiled = tensorcraft.compile(model, passes=["conv_bn", "dce"])
    with torch.no_grad(), tensorcraft.substitute(fold_conv_bn=lambda w, b, m, v, g, be, eps: (w, b)):
        wrong = compiled(x)
    with torch.no_grad():
        assert not torch.allclose(wrong, model(x)) and torch.allclose(wrong, model[0](x))
