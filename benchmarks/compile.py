"""`python -m benchmarks compile`: eager vs torch.compile (Inductor) vs tensorcraft.compile (C backend).

Four workloads: (a) a chain of 8 cheap elementwise ops and (b) a chain with transcendental ops,
both over 16M float32; (c) conv-bn-relu in eval mode; (d) an MLP. For each: steady-state time
(median over rounds that alternate the contenders, so a noisy neighbour hurts all alike), the
first call (compile included: torch.compile and ours each start from an empty cache dir), and the
max error against eager. "kernel only" rows call our C kernel for (a) and (b) directly, on a
hand-written Kernel, into a reused output buffer and into a fresh one (what a model call pays:
a fresh 64 MB buffer costs ~11 ms of page faults here).

    python -m benchmarks compile [--size N] [--rounds R] [--only a,b,c,d] [--no-inductor]

``--model transformer``: a 4-block pre-LayerNorm transformer (d=128, 4 heads, sequence 64, batch 8,
causal softmax attention, GELU MLP), inference and a training step (forward + backward), the three
contenders side by side in one run (rounds alternate them; the table gives the best of the rounds,
then the medians, which show how noisy the machine was), then where our time goes: guards and
dispatch per call, the generated wrapper alone, what the memory plan leaves unplanned, our
fused kernels against the torch ops they replace, and the training step of each contender split by
kind of op (matmuls, attention, GELU, layer norm, copies, inductor's fused kernels, the rest). ``--threads N`` sets torch's and our kernels'
threads (on a shared machine, 1 keeps OpenMP threads from waiting on each other).
``--model transformer-qkv``: the same model written as timm and nanoGPT write it (the fused qkv
projection reshaped to [3, batch, heads, seq, d/heads] and unbound in forward, q scaled before the
matmul, GELU as a module): another capture of the same computation.

    python -m benchmarks compile --model transformer|transformer-qkv [--rounds R] [--threads N] [--no-inductor]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

import torch
from torch import nn

from tensorcraft.compiler.api import compile as tc_compile
from tensorcraft.compiler.codegen import c as c_codegen
from tensorcraft.compiler.codegen.kernel import Buffer, Kernel, Output, Stmt, evaluate
from tensorcraft.timing import time_rounds


# -- the workloads -----------------------------------------------------------------------------
def cheap_chain(x: torch.Tensor) -> torch.Tensor:
    """(a) 8 cheap elementwise ops."""
    y = x * 1.5
    y = y + 0.5
    y = torch.relu(y)
    y = y - x
    y = y * x
    y = y + 1.0
    y = torch.abs(y)
    return y / 3.0


def transcendental_chain(x: torch.Tensor) -> torch.Tensor:
    """(b) 8 ops, three of them transcendental (sigmoid, tanh, exp)."""
    y = torch.sigmoid(x)
    y = y * x
    y = torch.tanh(y)
    y = y * 2.0
    y = torch.exp(y)
    y = y - 1.0
    y = y * x
    return y + 0.5


def _chain_kernel(name: str, n: int, steps: list[tuple]) -> Kernel:
    """The same chains as one hand-written Kernel: steps are (op,) or (op, constant) or (op, "x")."""
    stmts, prev = [Stmt("x0", "load", ("x",))], "x0"
    for i, (op, *arg) in enumerate(steps):
        if not arg:
            stmts.append(Stmt(f"t{i}", op, (prev,)))
        else:
            other = "x0" if arg[0] == "x" else f"c{i}"
            if other != "x0":
                stmts.append(Stmt(other, "const", (arg[0],)))
            stmts.append(Stmt(f"t{i}", op, (prev, other)))
        prev = f"t{i}"
    return Kernel(name, (n,), (Buffer("x", (n,)),), tuple(stmts), (Output("y", prev),))


def cheap_kernel(n: int) -> Kernel:
    return _chain_kernel("cheap_chain", n, [("mul", 1.5), ("add", 0.5), ("relu",), ("sub", "x"), ("mul", "x"),
                                            ("add", 1.0), ("abs",), ("div", 3.0)])


def transcendental_kernel(n: int) -> Kernel:
    return _chain_kernel("transcendental_chain", n, [("sigmoid",), ("mul", "x"), ("tanh",), ("mul", 2.0), ("exp",),
                                                     ("sub", 1.0), ("mul", "x"), ("add", 0.5)])


class ConvBnRelu(nn.Module):
    """(c) conv -> batch norm -> relu, evaluated in eval mode (bn folds into the conv)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(32, 64, 3, padding=1)
        self.bn = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class MLP(nn.Module):
    """(d) Linear -> GELU -> Linear -> GELU -> Linear."""

    def __init__(self, width: int = 1024) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(512, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                                 nn.Linear(width, 512))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _chain(fn: Callable) -> Callable[[int], tuple[Callable, torch.Tensor]]:
    return lambda size: (fn, torch.randn(size, generator=torch.Generator().manual_seed(0)))


def _conv_bn_relu(size: int) -> tuple[Callable, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = ConvBnRelu().eval()
    with torch.no_grad():   # non-trivial running statistics, so folding bn matters
        model.bn.running_mean.normal_(generator=gen)
        model.bn.running_var.uniform_(0.5, 2.0, generator=gen)
    return model, torch.randn(8, 32, 56, 56, generator=gen)


def _mlp(size: int) -> tuple[Callable, torch.Tensor]:
    torch.manual_seed(0)
    return MLP().eval(), torch.randn(1024, 512, generator=torch.Generator().manual_seed(0))


# key -> (title, make(size) -> (model, input))
WORKLOADS: dict[str, tuple[str, Callable[[int], tuple[Callable, torch.Tensor]]]] = {
    "a": ("(a) 8 cheap ops, {m}M f32", _chain(cheap_chain)),
    "b": ("(b) sigmoid/tanh/exp chain, {m}M f32", _chain(transcendental_chain)),
    "c": ("(c) conv-bn-relu eval [8,32,56,56]", _conv_bn_relu),
    "d": ("(d) MLP 512-1024-1024-512, batch 1024", _mlp),
}


# -- measuring ---------------------------------------------------------------------------------
def first_call(make: Callable[[], Callable], x: torch.Tensor) -> tuple[Callable, float, torch.Tensor]:
    """Build the compiled callable and run it once: the latency a user sees on the first call."""
    start = time.perf_counter()
    fn = make()
    with torch.no_grad():
        out = fn(x)
    return fn, time.perf_counter() - start, out


def _compilers() -> dict[str, Callable[[Callable], Callable]]:
    return {"inductor": torch.compile, "ours": lambda model: tc_compile(model, backend="c")}


def first_call_in_fresh_process(key: str, contender: str, size: int) -> float:
    """The first call as a user meets it: a new Python process (torch already imported, the
    compiler not yet), empty caches. Runs ``python -c`` on _first_call_child below."""
    env = {**os.environ, "TENSORCRAFT_CACHE_DIR": tempfile.mkdtemp(prefix="tensorcraft_bench_"),
           "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="inductor_bench_")}
    code = f"from benchmarks.compile import _first_call_child; _first_call_child({key!r}, {contender!r}, {size})"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)
    if result.returncode != 0:
        raise RuntimeError(f"first call of {contender} on ({key}) failed:\n{result.stderr[-3000:]}")
    return float(result.stdout.strip().splitlines()[-1])


def _first_call_child(key: str, contender: str, size: int) -> None:
    model, x = WORKLOADS[key][1](size)
    print(first_call(lambda: _compilers()[contender](model), x)[1])


def steady(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median seconds per call; rounds take the contenders in turn so that noise hits all alike."""
    with torch.no_grad():
        for fn in contenders.values():   # warm-up
            fn()
        times = time_rounds(contenders, rounds)
    return {name: statistics.median(t) for name, t in times.items()}


def max_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got.float() - expected.float()).abs().max()) if got.numel() else 0.0


def run_workload(key: str, size: int, rounds: int, use_inductor: bool, fresh_process: bool) -> list[dict]:
    title = WORKLOADS[key][0].format(m=f"{size / 2**20:g}")
    model, x = WORKLOADS[key][1](size)
    with torch.no_grad():
        expected = model(x)
    contenders: dict[str, Callable[[], object]] = {"eager": lambda: model(x)}
    first: dict[str, float] = {}
    errors: dict[str, float] = {}
    for name, compile_fn in _compilers().items():
        if name == "inductor" and not use_inductor:
            continue
        torch._dynamo.reset()
        compiled, first[name], _ = first_call(lambda: compile_fn(model), x)
        if fresh_process:
            first[name] = first_call_in_fresh_process(key, name, size)
        with torch.no_grad():
            errors[name] = max_error(compiled(x), expected)   # a steady-state call, not the first
        contenders[name] = lambda compiled=compiled: compiled(x)
    kernel = {"a": cheap_kernel, "b": transcendental_kernel}.get(key)
    if kernel is not None:   # our C kernel alone, timed in the same rounds as the rest
        compiled_kernel, kernel_first, kernel_error = compile_kernel_alone(kernel(x.numel()), x, expected)
        out = torch.empty_like(x)
        contenders["kernel, output reused"] = lambda: compiled_kernel(x, out)
        contenders["kernel, fresh output"] = lambda: compiled_kernel(x, torch.empty_like(x))
    times = steady(contenders, rounds)
    base = {k: v for k, v in times.items() if k in ("eager", "inductor")}
    rows = [dict(title=title, times={**base, "ours": times.get("ours")}, first=first, errors=errors)]
    if kernel is not None:
        rows += [dict(title="   kernel only, output reused", times={**base, "ours": times["kernel, output reused"]},
                      first={"ours": kernel_first}, errors={"ours": kernel_error}),
                 dict(title="   kernel only, fresh output", times={**base, "ours": times["kernel, fresh output"]},
                      first={}, errors={"ours": kernel_error})]
    return rows


def compile_kernel_alone(kernel: Kernel, x: torch.Tensor, expected: torch.Tensor) -> tuple[Callable, float, float]:
    """Our C kernel for a hand-written Kernel: the callable, its compile + first run, its error."""
    start = time.perf_counter()
    compiled = c_codegen.compile_kernel(kernel)
    out = torch.empty_like(x)
    compiled(x, out)
    first = time.perf_counter() - start
    error = max(max_error(out, expected), max_error(out, evaluate(kernel, x)[0]))
    return compiled, first, error


# -- report ------------------------------------------------------------------------------------
def _ms(seconds: float | None) -> str:
    return f"{'-':>9}" if seconds is None else f"{seconds * 1e3:9.1f}"


def print_table(rows: list[dict]) -> None:
    head = (f"{'workload':42} {'eager ms':>9} {'inductor':>9} {'ours ms':>9} {'eager/ours':>10} "
            f"{'ours/ind':>8} {'1st: ind s':>10} {'ours s':>7} {'ours/ind':>8} {'max err ours':>12}")
    print(head)
    print("-" * len(head))
    for r in rows:
        t, f = r["times"], r["first"]
        e, i, o = t.get("eager"), t.get("inductor"), t.get("ours")
        speedup = f"{e / o:9.1f}x" if e and o else "         -"
        vs_ind = f"{o / i:7.2f}x" if i and o else "       -"
        fi, fo = f.get("inductor"), f.get("ours")
        first_ratio = f"{fo / fi:7.3f}x" if fi and fo else "       -"
        err = r["errors"].get("ours")
        print(f"{r['title']:42} {_ms(e)} {_ms(i)} {_ms(o)} {speedup} {vs_ind} "
              f"{(f'{fi:10.2f}' if fi else '         -')} {(f'{fo:7.2f}' if fo else '      -')} {first_ratio} "
              f"{(f'{err:12.2e}' if err is not None else '           -')}")


def print_targets(rows: list[dict]) -> None:
    """The issue's targets, checked on this run's numbers."""
    by_title = {r["title"][:3]: r for r in rows}
    checks = []
    for key in ("(a)", "(b)"):
        r = by_title.get(key)
        if r and "ours" in r["times"]:
            t = r["times"]
            if key == "(a)":
                checks.append(("(a) >= 5x faster than eager", t["eager"] / t["ours"] >= 5, f"{t['eager'] / t['ours']:.1f}x"))
                if "inductor" in t:
                    checks.append(("(a) within 1.1x of inductor", t["ours"] <= 1.1 * t["inductor"], f"{t['ours'] / t['inductor']:.2f}x"))
            elif "inductor" in t:
                checks.append(("(b) within 1.3x of inductor", t["ours"] <= 1.3 * t["inductor"], f"{t['ours'] / t['inductor']:.2f}x"))
    for r in rows:
        f = r["first"]
        if "inductor" in f and "ours" in f:
            checks.append((f"{r['title'][:3]} first call <= 0.1x torch.compile's", f["ours"] <= 0.1 * f["inductor"],
                           f"{f['ours'] / f['inductor']:.3f}x"))
    if checks:
        print("\ntargets:")
        for what, ok, value in checks:
            print(f"  {'met   ' if ok else 'MISSED'} {what}: {value}")


# -- the transformer ---------------------------------------------------------------------------
class Block(nn.Module):
    """Pre-LayerNorm: x + attention(ln1(x)), then + mlp(ln2(x)); causal softmax attention, GELU MLP."""

    def __init__(self, d: int = 128, heads: int = 4, seq: int = 64) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("causal", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (d // h) ** -0.5
        weights = scores.masked_fill(self.causal[:t, :t], float("-inf")).softmax(dim=-1)
        x = x + self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class PackedQkvBlock(Block):
    """The same block written as timm and nanoGPT do: one fused qkv projection reshaped to
    [3, batch, heads, seq, d/heads] and unbound in forward, the scale applied to q, GELU as a module call."""

    def __init__(self, d: int = 128, heads: int = 4, seq: int = 64) -> None:
        super().__init__(d, heads, seq)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        qkv = self.qkv(self.ln1(x)).reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * (d // h) ** -0.5
        weights = (q @ k.transpose(-2, -1)).masked_fill(self.causal[:t, :t], float("-inf")).softmax(dim=-1)
        x = x + self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, blocks: int = 4, d: int = 128, block: type = Block) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[block(d) for _ in range(blocks)])
        self.ln = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.blocks(x))


def _training_step(model: nn.Module, fn: Callable, x: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        for p in model.parameters():
            p.grad = None
        fn(x).square().mean().backward()
    return step


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    return statistics.median(time_rounds({"fn": fn}, repeat)["fn"])


def breakdown(compiled, x: torch.Tensor, repeat: int) -> list[str]:
    """Where the time of one compiled call goes (see the module docstring)."""
    from torch.utils import _pytree as pytree

    from tensorcraft.compiler.guards import check_guards
    compiler = compiled._compiler
    flat, spec = pytree.tree_flatten(((x,), {}))
    training = compiler.module.training
    entry = next(e for e in compiler.entries if e.compiled is not None and  # the entry that answers this call
                 check_guards(e.guards, flat, spec, training, e.fetch(compiler.module)) is None)
    graph, plan = entry.compiled, entry.compiled.plan
    guard = _median_time(lambda: check_guards(entry.guards, flat, spec, training, entry.fetch(compiler.module)),
                         repeat * 5)
    params = entry.fetch(compiler.module)
    context = torch.enable_grad() if entry.need_grad else torch.no_grad()
    with context:
        whole = _median_time(lambda: compiled(x), repeat)
        wrapper = _median_time(lambda: graph.run(flat, params, entry.need_grad), repeat)
    externs = sum(1 for n in graph.optimized.nodes if n.kind == "call" and n.op != "getitem")
    attention = sum(1 for n in graph.optimized.nodes if n.op in ("attention", "scaled_dot_product_attention"))
    lines = [f"   guards + fetching {len(params)} module tensors: {guard * 1e6:7.1f} us per call "
             f"({len(entry.guards.values)} Python values, "
             f"{sum(c is not None for c in entry.guards.snapshots or ())} tensors compared by value)",
             f"   the generated wrapper alone:       {wrapper * 1e3:7.2f} ms of {whole * 1e3:.2f} ms per call "
             f"({externs} torch calls, {attention} of them fused attention; "
             f"{graph.optimized.count(kind='kernel')} fused kernels)",
             f"   memory: {plan.unplanned_bytes / 2**20:.1f} MiB allocated by torch calls per call (unplanned), "
             f"{len(plan.slot_of)} kernel outputs in {len(plan.slots)} reused slots"]
    ours_k = torch_k = 0.0
    for node in graph.optimized.nodes:
        if node.kind != "kernel":
            continue
        kernel = node.target
        inputs = [torch.randn(b.shape) for b in kernel.inputs]
        outputs = [torch.empty(kernel.output_shape(o)) for o in kernel.outputs]
        run = graph.code.namespace[kernel.name]
        ours_k += _median_time(lambda: run(*inputs, *outputs), repeat)
        torch_k += _median_time(lambda: evaluate(kernel, *inputs), repeat)
    if graph.optimized.count(kind="kernel"):
        lines.append(f"   fused kernels: {ours_k * 1e3:.2f} ms, the same ops in torch: {torch_k * 1e3:.2f} ms")
    return lines


# aten ops by kind, for op_breakdown; inductor's generated kernels run inside "## Call CompiledFxGraph ...".
OP_KINDS = {
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "attention": ("aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_scaled_dot_product_flash_attention_for_cpu_backward", "aten::_softmax",
                  "aten::_softmax_backward_data"),
    "gelu": ("aten::gelu", "aten::gelu_backward"),
    "layer norm": ("aten::native_layer_norm", "aten::native_layer_norm_backward"),
    "copies": ("aten::copy_", "aten::cat", "aten::clone"),
}


def op_breakdown(steps: dict[str, Callable[[], None]], repeat: int = 5) -> list[str]:
    """Milliseconds per step in each kind of op (OP_KINDS; "fused kernels": inductor's generated code;
    "the rest": every other op, autograd's bookkeeping and Python), one row per contender."""
    from torch.profiler import ProfilerActivity, profile

    rows: dict[str, dict[str, float]] = {}
    kind_of = {op: kind for kind, ops in OP_KINDS.items() for op in ops}
    for name, step in steps.items():
        step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(repeat):
                step()
        totals = dict.fromkeys([*OP_KINDS, "fused kernels", "the rest"], 0.0)
        for event in prof.key_averages():
            kind = kind_of.get(event.key)
            if kind is None:
                kind = "fused kernels" if event.key.startswith("## Call CompiledFxGraph") else "the rest"
            totals[kind] += event.self_cpu_time_total / 1e3 / repeat
        rows[name] = totals
    kinds = list(next(iter(rows.values())))
    lines = ["   " + f"{'':10}" + "".join(f"{k:>14}" for k in kinds) + f"{'total':>10}"]
    for name, totals in rows.items():
        lines.append("   " + f"{name:10}" + "".join(f"{totals[k]:14.2f}" for k in kinds)
                     + f"{sum(totals.values()):10.2f}")
    return lines


TRANSFORMERS = {"transformer": Block, "transformer-qkv": PackedQkvBlock}


def run_transformer(rounds: int, use_inductor: bool, variant: str = "transformer") -> None:
    torch.manual_seed(0)
    model, x = Transformer(block=TRANSFORMERS[variant]), torch.randn(8, 64, 128, generator=torch.Generator().manual_seed(0))
    contenders: dict[str, Callable] = {"eager": model, "ours": tc_compile(model, backend="c")}
    if use_inductor:
        torch._dynamo.reset()
        contenders["inductor"] = torch.compile(model)
    results: dict[str, dict[str, float]] = {}   # best of the rounds
    medians: dict[str, dict[str, float]] = {}
    firsts: dict[str, dict[str, float]] = {}
    errors: dict[str, float] = {}
    for mode in ("inference", "training"):
        model.train(mode == "training")
        calls: dict[str, Callable[[], object]] = {}
        for name, fn in contenders.items():
            if mode == "inference":
                calls[name] = lambda fn=fn: fn(x)
            else:
                calls[name] = _training_step(model, fn, x)
            start = time.perf_counter()
            with (torch.no_grad() if mode == "inference" else torch.enable_grad()):
                calls[name]()
            firsts.setdefault(mode, {})[name] = time.perf_counter() - start
        if mode == "inference":
            with torch.no_grad():
                expected = model(x)
                errors = {name: max_error(fn(x), expected) for name, fn in contenders.items() if name != "eager"}
        with (torch.no_grad() if mode == "inference" else torch.enable_grad()):
            for _ in range(2):  # warm-up (ours: the first call captures, the second compiles nothing more)
                for fn in calls.values():
                    fn()
            times = time_rounds(calls, rounds)  # in turn, so that a noisy neighbour hurts all alike
        results[mode] = {name: min(t) for name, t in times.items()}
        medians[mode] = {name: statistics.median(t) for name, t in times.items()}
    print(f"\n{variant + ' (4 blocks, d=128, 8x64), best':40} {'eager ms':>9} {'inductor':>9} {'ours ms':>9} "
          f"{'ours/eager':>10} {'ours/ind':>8} {'1st: ind s':>10} {'ours s':>7}")
    for mode, t in results.items():
        e, i, o = t["eager"], t.get("inductor"), t["ours"]
        f = firsts[mode]
        print(f"{mode:40} {_ms(e)} {_ms(i)} {_ms(o)} {o / e:9.2f}x "
              + (f"{o / i:7.2f}x" if i else "       -") + " "
              + (f"{f['inductor']:10.2f}" if "inductor" in f else "         -") + f" {f['ours']:7.2f}")
    for mode, t in medians.items():  # how noisy: the medians, and how far they sit above the best
        e, i, o = t["eager"], t.get("inductor"), t["ours"]
        print(f"{'  ' + mode + ', median':40} {_ms(e)} {_ms(i)} {_ms(o)} {o / e:9.2f}x "
              + (f"{o / i:7.2f}x" if i else "       -") + "   (median/best: "
              + ", ".join(f"{name} {t[name] / results[mode][name]:.2f}" for name in t) + ")")
    print("max error against eager (inference): " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))
    print("\nwhere our time goes:")
    for mode in ("inference", "training"):
        model.train(mode == "training")
        print(f" {mode}:")
        with (torch.no_grad() if mode == "inference" else torch.enable_grad()):
            for line in breakdown(contenders["ours"], x, max(3, rounds // 2)):
                print(line)
    model.train(True)
    print(" training step, by kind of op (torch.profiler, self time per step; the profiler's own cost per op "
          "inflates the contenders that run more ops):")
    for line in op_breakdown({name: _training_step(model, fn, x) for name, fn in contenders.items()}):
        print(line)
    print("\ntargets:")
    for mode, t in results.items():
        if "inductor" in t:
            ok = t["ours"] <= t["eager"] and t["ours"] <= 1.1 * t["inductor"]
            print(f"  {'met   ' if ok else 'MISSED'} {mode}: ours <= 1.0x eager and <= 1.1x inductor, best of "
                  f"{rounds} ({t['ours'] / t['eager']:.2f}x, {t['ours'] / t['inductor']:.2f}x)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks compile", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 24, help="elements of the elementwise chains (16M)")
    parser.add_argument("--rounds", type=int, default=15, help="timed calls per contender (median reported)")
    parser.add_argument("--only", default="a,b,c,d", help="comma-separated workloads among a,b,c,d")
    parser.add_argument("--model", choices=["chains", *TRANSFORMERS], default="chains",
                        help="the workloads a-d (default), or the transformer (transformer-qkv: the same model "
                             "with its fused qkv projection reshaped and unbound, as timm writes it)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for torch and for our kernels (default: as configured)")
    parser.add_argument("--no-inductor", action="store_true", help="leave torch.compile out (it takes ~10 s per model)")
    parser.add_argument("--first-call", choices=["process", "in-process"], default="process",
                        help="measure first calls in a fresh process each (default, fair: neither compiler is "
                             "warmed up by earlier workloads) or in this one (faster)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)   # read by our C kernels when they load

    # Both compilers start cold: fresh cache dirs, so the first call includes the real compile.
    # In-process, torch.compile's first workload also pays its one-time warm-up, later ones do not.
    os.environ["TENSORCRAFT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tensorcraft_bench_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_bench_")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"OpenMP threads for ours: {c_codegen.available_threads()}; {args.rounds} rounds "
          + ("(best and median)" if args.model in TRANSFORMERS else "(median)") + "; first calls from empty caches, "
          + ("each in a fresh process" if args.first_call == "process" else "in this process"))
    if args.model in TRANSFORMERS:
        run_transformer(args.rounds, not args.no_inductor, args.model)
        return 0
    rows = []
    for key in args.only.split(","):
        rows += run_workload(key, args.size, args.rounds, not args.no_inductor, args.first_call == "process")
    print()
    print_table(rows)
    print_targets(rows)
    return 0
