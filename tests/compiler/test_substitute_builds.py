"""Under tensorcraft.substitute nothing is cached, yet `.compiled` shows the build the substitute made."""
from __future__ import annotations

import torch

import tensorcraft
from tensorcraft.compiler.passes.dce import eliminate_dead_code


def test_compiled_shows_the_substitutes_build_and_the_cache_stays_empty():
    def f(x):
        unused = x.exp()  # noqa: F841
        return x.sin() + 1

    keep_everything = lambda graph: graph.copy()  # noqa: E731
    compiled, x = tensorcraft.compile(f, passes=["dce"]), torch.randn(3)
    with tensorcraft.substitute(eliminate_dead_code=keep_everything):
        torch.testing.assert_close(compiled(x), f(x))
    assert [n.op for n in compiled.compiled.optimized.nodes if n.kind == "call"] == ["exp", "sin", "add"]
    assert compiled._compiler.entries == [] and compiled.stats.compiles == 1
    compiled(x)  # no substitute: the library's pass, cached
    assert [n.op for n in compiled.compiled.optimized.nodes if n.kind == "call"] == ["sin", "add"]
    assert len(compiled._compiler.entries) == 1 and eliminate_dead_code.library is not keep_everything
