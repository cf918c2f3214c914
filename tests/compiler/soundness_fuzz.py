"""Random programs x random call sequences, for the differential soundness test (test_fuzz_soundness.py).

A case is a program (Python source: a function, or an ``nn.Module``, reading its arguments, globals,
a closure cell, a helper function's global and cell, a config object's attribute, a global tensor,
a namedtuple or a container argument) and a sequence of calls; between calls a *change* may alter
any of those (argument values, shapes, strides, dtypes, container types, Python scalars, globals,
cells, module attributes and weights). ``run_case`` calls the compiled program and the eager one
side by side after each change and returns the first difference, if any. ``shrink`` removes program
lines and calls while the difference persists, and ``show`` prints what is left, runnable.
"""
from __future__ import annotations

import collections
import dataclasses
import random
from typing import Any

import torch

import tensorcraft

P = collections.namedtuple("P", "a b")


@dataclasses.dataclass
class Holder:
    t: torch.Tensor
    k: float


# expressions over the running value ``v``: each line is ``v = <expr>``, so any line can be dropped
SCALARS = ["s", "G", "CFG.k", "c0", "TABLE['a']", "K.factor"]
FUNCTION_LINES = [
    "v = v * {s}", "v = v + {s}", "v = torch.sin(v) * {s}", "v = v.relu() - {s}",
    "v = v + y", "v = v * GT", "v = v @ W", "v = h(v)", "v = K.apply(v)",
    "v = torch.stack(P(v * 2, y + 1)).sum(0)", "v = torch.stack([v, y]).mean(0)",
    "v = v + c[0] * c[1] if isinstance(c, (tuple, list)) else v + c['a'] * c['b']",
    "v = v + d.t * d.k", "v = v - v.sum(-1, keepdim=True) / v.shape[-1]",
    "v = torch.where(v > 0, v, y)", "v = v[..., ::1] * 0.5", "v = v.tanh()",
    "v = v * {s} if s > 0 else v - {s}",
]
MODULE_LINES = ["v = self.lin(v)", "v = v * self.scale", "v = v + self.bias_term", "v = self.act(v)",
                "v = v * {s}", "v = h(v)", "v = v + y", "v = torch.stack(P(v, y)).sum(0)"]
OUTPUTS = ["v", "(v, v * 2)", "[v, y + v]", "{'out': v}"]

PRELUDE = '''\
import torch
from soundness_fuzz import P, Holder
G = {G!r}
TABLE = {{'a': {A!r}}}
CFG = __import__('types').SimpleNamespace(k={k!r})
H = {H!r}
GT = torch.linspace(-1, 1, {n})
W = torch.linspace(-0.5, 0.5, {n} * {n}).reshape({n}, {n})

class Scaler:
    def __init__(self):
        self.factor = {F!r}
    def apply(self, v):
        return v * self.factor

K = Scaler()

def make_helper(hk):
    def h(v):
        return v * H + hk
    def set_hk(value):
        nonlocal hk
        hk = value
    return h, set_hk

h, set_hk = make_helper({hk!r})

def make(c0):
    def set_c0(value):
        nonlocal c0
        c0 = value
'''


@dataclasses.dataclass
class Case:
    lines: list[str]
    output: str
    module: bool
    n: int
    globals_: dict
    calls: list[str]               # the change before each call ("" for none)
    backend: str
    seed: int
    grad: bool = False

    def source(self) -> str:
        text = PRELUDE.format(n=self.n, **self.globals_)
        if self.module:
            body = "\n".join(f"            {line}" for line in self.lines)
            text += f'''    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear({self.n}, {self.n})
            self.scale = 2.0
            self.bias_term = 0.5
            self.act = torch.tanh

        def forward(self, x, y, s):
            v = x * c0
{body}
            return {self.output}
    return M(), set_c0
'''
        else:
            body = "\n".join(f"        {line}" for line in self.lines)
            text += f'''    def f(x, y, s, c, d):
        v = x * c0
{body}
        return {self.output}
    return f, set_c0
'''
        return text


def draw_case(rng: random.Random, backend: str, seed: int, max_lines: int = 6, max_calls: int = 6) -> Case:
    module = rng.random() < 0.3
    pool = MODULE_LINES if module else FUNCTION_LINES
    lines = [rng.choice(pool).replace("{s}", rng.choice(SCALARS)) for _ in range(rng.randint(1, max_lines))]
    globals_ = {"G": rng.choice([2.0, 0.5, 3]), "A": rng.choice([1.5, -1.0]), "k": rng.choice([0.25, 2.0]),
                "H": rng.choice([1.5, -0.5]), "F": rng.choice([2.0, 0.75]), "hk": rng.choice([0.0, 1.0])}
    calls = [""] + [rng.choice(CHANGES_MODULE if module else CHANGES) for _ in range(rng.randint(1, max_calls))]
    return Case(lines, rng.choice(OUTPUTS), module, rng.choice([3, 4]), globals_, calls, backend, seed,
                grad=module and rng.random() < 0.3)


# the changes between calls: each a line run in a namespace holding the program's globals, its setters,
# the arguments ``args`` (a dict) and the module ``m``
CHANGES = [
    "", "", "args['x'] = torch.randn_like(args['x'])", "args['x'] = torch.randn(args['x'].shape[0] + 1, N)",
    "args['x'] = torch.randn(N, args['x'].shape[0]).t()", "args['x'] = args['x'].double()",
    "args['y'] = torch.randn(N)", "args['s'] = args['s'] + 1", "args['s'] = float(args['s'])",
    "args['s'] = -2", "args['c'] = list(args['c'])", "args['c'] = tuple(args['c'])",
    "args['c'] = {'a': torch.randn(N), 'b': 2.0}", "args['c'] = (torch.randn(N), 3)",
    "args['d'] = Holder(torch.randn(N), args['d'].k + 1)",
    "ns['G'] = ns['G'] * 2", "ns['G'] = 5", "ns['TABLE']['a'] = 7.0", "ns['CFG'].k = ns['CFG'].k + 1",
    "ns['H'] = ns['H'] + 1", "ns['set_hk'](3.0)", "set_c0(1.5)", "set_c0(-2)", "ns['K'].factor = -1.0",
    "ns['GT'].mul_(2)", "ns['W'].add_(0.25)", "ns['GT'] = torch.ones(N)",
]
CHANGES_MODULE = [
    "", "", "args['x'] = torch.randn_like(args['x'])", "args['x'] = torch.randn(args['x'].shape[0] + 1, N)",
    "args['x'] = torch.randn(N, args['x'].shape[0]).t()", "args['s'] = args['s'] + 1", "args['s'] = 0.5",
    "args['y'] = torch.randn(N)", "ns['H'] = ns['H'] + 1", "ns['set_hk'](3.0)", "set_c0(1.5)",
    "m.scale = m.scale + 1", "m.bias_term = -1.0", "m.act = torch.sigmoid",
    "with torch.no_grad():\n    m.lin.weight.mul_(2)",
    "m.lin.weight.data.add_(1)", "m.lin.bias = torch.nn.Parameter(torch.randn(N))",
    "m.lin = torch.nn.Linear(N, N)", "ns['G'] = 4.0",
]


def build(case: Case) -> tuple[dict, Any, Any]:
    """Run the program's source: (its namespace, the program, the cell setter)."""
    ns: dict = {"__name__": f"fuzz_case_{case.seed}"}
    exec(compile(case.source(), f"<fuzz case {case.seed}>", "exec"), ns)  # noqa: S102 - our own generated code
    program, set_c0 = ns["make"](1.0)
    return ns, program, set_c0


def _first_args(case: Case, rng: random.Random) -> dict:
    n = case.n
    args = {"x": torch.randn(2, n), "y": torch.randn(n), "s": rng.choice([2, 0.5, -1.0])}
    if not case.module:
        args["c"] = (torch.randn(n), 2.0)
        args["d"] = Holder(torch.randn(n), 1.0)
    return args


def _call_args(case: Case, args: dict) -> tuple:
    keys = ("x", "y", "s") if case.module else ("x", "y", "s", "c", "d")
    return tuple(args[k] for k in keys)


def _close(a: Any, b: Any) -> str | None:
    la, sa = tensorcraft.trees.flatten(a)
    lb, sb = tensorcraft.trees.flatten(b)
    if sa != sb:
        return f"structure {sa} != {sb}"
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return f"{type(x).__name__} != {type(y).__name__}"
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return f"tensor {list(x.shape)} {x.dtype} != {list(y.shape)} {y.dtype}"
            if not torch.allclose(x.detach(), y.detach(), rtol=1e-4, atol=1e-4, equal_nan=True):
                return f"values differ by up to {(x.detach() - y.detach()).abs().max().item():.3g}"
        elif x != y:
            return f"{x!r} != {y!r}"
    return None


TALLY = collections.Counter()  # calls compared, compiles, cache hits, eager calls: what a run exercised


def run_case(case: Case) -> str | None:
    """The first call whose compiled answer differs from eager's (or raises where eager does not), in words."""
    rng = random.Random(case.seed)
    torch.manual_seed(case.seed)
    ns, program, set_c0 = build(case)
    compiled = tensorcraft.compile(program, backend=case.backend)
    args = _first_args(case, rng)
    scope = {"torch": torch, "Holder": Holder, "args": args, "ns": ns, "set_c0": set_c0, "m": program, "N": case.n}
    with torch.set_grad_enabled(case.grad):
        for i, change in enumerate(case.calls):
            if change:
                exec(change, scope)  # noqa: S102 - one of CHANGES
            call = _call_args(case, args)
            try:
                expected = program(*call)
            except Exception:  # noqa: BLE001 - the change made the program invalid (a shape): nothing to compare
                continue
            try:
                got = compiled(*call)
            except Exception as error:  # noqa: BLE001
                return f"call {i}: the compiled call raised {type(error).__name__}: {error}"
            TALLY["calls compared"] += 1
            why = _close(got, expected)
            if why is not None:
                return f"call {i}: {why}\n{compiled.explain()}"
    stats = compiled.stats
    TALLY.update({"compiles": stats.compiles, "cache hits": stats.cache_hits, "eager calls": stats.eager_calls,
                  "eager entries": sum(e.compiled is None for e in compiled._compiler.entries)
                  if hasattr(compiled, "_compiler") else 0})
    return None


def shrink(case: Case) -> Case:
    """Drop program lines, then calls, one at a time, while the case still fails."""
    changed = True
    while changed:
        changed = False
        for field_name in ("lines", "calls"):
            items = getattr(case, field_name)
            for i in range(len(items) - 1, 0 if field_name == "calls" else -1, -1):
                if field_name == "lines" and len(items) == 1:
                    break
                trial = dataclasses.replace(case, **{field_name: items[:i] + items[i + 1:]})
                try:
                    failing = run_case(trial) is not None
                except Exception:  # noqa: BLE001 - a shrink that breaks the harness is not kept
                    failing = False
                if failing:
                    case, items, changed = trial, getattr(trial, field_name), True
    return case


def show(case: Case, why: str) -> str:
    calls = "\n".join(f"  call {i}: {change or '(no change)'}" for i, change in enumerate(case.calls))
    return (f"compiled differs from eager (backend {case.backend}, seed {case.seed}, grad {case.grad}): {why}\n"
            f"--- program ---\n{case.source()}--- calls (a change, then compiled(...) vs eager) ---\n{calls}")
