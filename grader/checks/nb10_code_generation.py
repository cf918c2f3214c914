"""Checks for notebook 10 (code generation): the Python kernel, the C kernel and the wrapper.

Ground truth is eager PyTorch: every case is a small function of tensors, run eagerly for the
expected result and compiled by ``tensorcraft.compile`` with the learner's stage substituted in
(``tensorcraft.substitute(python_source=...)``, ``c_source=...``, ``generate_wrapper=...``), so that
passing means "the whole compiler works with my piece in it". The kernels are compiled through the
``backend=`` parameter with a thin layer that fills every output buffer with NaN before the kernel
runs: a kernel that leaves an element unwritten cannot pass by finding the right value in memory.

The wrapper is also checked for freeing: every intermediate that the memory plan says dies (and
that does not live in a reusable slot) must be deleted before the next buffer is allocated.
While the learner's code runs, the library's own version of the stage is a tripwire.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

import tensorcraft
from tensorcraft.compiler.codegen.backends import load_backend
from tensorcraft.compiler.codegen.kernel import Kernel
from tensorcraft.compiler.passes.memory_plan import MemoryPlan, is_kernel_output

from .exercise import Case, Exercise, Group

# ---------------------------------------------------------------- the programs a case compiles


@dataclass(frozen=True)
class Program:
    """A function of tensors, with a short readable name (what a failing case shows)."""
    name: str
    fn: Callable[..., Any]

    def __call__(self, *inputs: torch.Tensor) -> Any:
        return self.fn(*inputs)

    def __repr__(self) -> str:
        return self.name


def _sigmoid_chain(x, y):
    return torch.sigmoid(x * 2.0 + y) * torch.tanh(x) - 0.1


def _gelu_of_sum(x, y, z):
    return F.gelu(x + y) * z - torch.relu(y - 1.0 / 3.0)


def _two_outputs(x, y):
    u = x * y + 0.5
    return torch.tanh(u), u * u - x


def _max_min(x, y):
    return torch.maximum(x, y) - torch.minimum(x * 0.25, y) + torch.abs(x)


def _infinite_bounds(x, y):
    return torch.minimum(x * 2.0, x + math.inf) + torch.maximum(x + y, y - x - math.inf) + torch.tanh(y)


def _row_sum(x, y):
    return ((x - y) * (x + y)).sum(-1, keepdim=True)


def _row_mean_max(x, y):
    v = torch.sigmoid(x) * y
    return v.mean(-1), v.amax(-1, keepdim=True) + 0.1


def _mlp(x, w1, b1, w2):
    h = F.gelu(x @ w1 + b1) * 0.5 + 0.25
    return h @ w2


def _mlp_two_heads(x, w1, b1, w2):
    h = torch.relu(x @ w1 + b1)
    s = (h * h).sum(-1, keepdim=True)
    t = torch.tanh(h) * 0.5
    return (t @ w2) * s, torch.exp(t).mean(-1)


def _transposed_input(x, w1, b1, w2):
    h = torch.sigmoid(x.t() * 2.0 + b1) @ w1
    return h * 0.1 + torch.tanh(h), w2


# ---------------------------------------------------------------- random elementwise chains

UNARY = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu, "neg": torch.neg, "abs": torch.abs,
         "sin": torch.sin, "gelu": F.gelu, "silu": F.silu, "exp_tanh": lambda v: torch.exp(torch.tanh(v))}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
          "minimum": torch.minimum, "div": lambda a, b: a / (1.0 + torch.abs(b))}
CONSTANTS = (0.1, 1.0 / 3.0, -2.5, 0.75)


@dataclass(frozen=True)
class Chain:
    """A random elementwise program: each step applies one op to earlier values (inputs first)."""
    arity: int
    steps: tuple[tuple, ...]    # ("unary", name, i) | ("binary", name, i, j) | ("const", name, i, c)
    reduce: str | None = None   # None, "sum" (keepdim) or "mean" over the last axis

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        values = list(inputs)
        for step in self.steps:
            if step[0] == "unary":
                values.append(UNARY[step[1]](values[step[2]]))
            elif step[0] == "binary":
                values.append(BINARY[step[1]](values[step[2]], values[step[3]]))
            else:
                values.append(BINARY[step[1]](values[step[2]], step[3]))
        out = values[-1]
        if self.reduce == "sum":
            return out.sum(-1, keepdim=True)
        if self.reduce == "mean":
            return out.mean(-1)
        return out

    def __repr__(self) -> str:
        names = [f"x{i}" for i in range(self.arity)]
        for step in self.steps:
            if step[0] == "unary":
                names.append(f"{step[1]}({names[step[2]]})")
            elif step[0] == "binary":
                names.append(f"{step[1]}({names[step[2]]}, {names[step[3]]})")
            else:
                names.append(f"{step[1]}({names[step[2]]}, {step[3]:g})")
        text = names[-1]
        return f"{self.reduce}({text})" if self.reduce else text


def _draw(g: torch.Generator, n: int) -> int:
    return int(torch.randint(n, (1,), generator=g))


def _random_chain(g: torch.Generator, arity: int, reduce: str | None = None) -> Chain:
    steps: list[tuple] = []
    n_values = arity
    for i in range(arity - 1):  # first join every input, so that each is read by the kernel
        steps.append(("binary", list(BINARY)[_draw(g, len(BINARY))], n_values - 1 if i else 0, i + 1))
        n_values += 1
    for _ in range(2 + _draw(g, 3)):
        kind = _draw(g, 3)
        last = n_values - 1
        if kind == 0:
            steps.append(("unary", list(UNARY)[_draw(g, len(UNARY))], last))
        elif kind == 1:
            steps.append(("binary", list(BINARY)[_draw(g, len(BINARY))], last, _draw(g, n_values)))
        else:
            steps.append(("const", ("add", "mul", "sub")[_draw(g, 3)], last, CONSTANTS[_draw(g, len(CONSTANTS))]))
        n_values += 1
    return Chain(arity, tuple(steps), reduce)


def _random_inputs(g: torch.Generator, arity: int, dtype: torch.dtype, min_rank: int = 1) -> tuple[torch.Tensor, ...]:
    """The first input has the full shape; the others broadcast (size-1 dims, fewer leading dims);
    rank-2+ inputs are sometimes a transpose (not contiguous)."""
    rank = min_rank + _draw(g, 4 - min_rank)
    shape = [1 + _draw(g, 6) for _ in range(rank)]
    inputs = []
    for i in range(arity):
        own = list(shape) if i == 0 else [1 if _draw(g, 3) == 0 else n for n in shape][_draw(g, rank):]
        own = own or [shape[-1]]
        if len(own) >= 2 and _draw(g, 2):
            t = torch.randn(*reversed(own), generator=g).to(dtype).transpose(0, -1)
            inputs.append(t)
        else:
            inputs.append(torch.randn(*own, generator=g).to(dtype))
    return tuple(inputs)


def _chain_cases(g: torch.Generator, n: int, reductions: bool) -> list[Case]:
    cases = []
    for k in range(n):
        arity = 1 + _draw(g, 3)
        reduce = ("sum", "mean")[_draw(g, 2)] if reductions and k % 3 == 2 else None
        dtype = (torch.float32, torch.float64)[_draw(g, 2)]
        chain = _random_chain(g, arity, reduce)
        inputs = _random_inputs(g, arity, dtype)
        shapes = ", ".join(f"{list(t.shape)}{'' if t.is_contiguous() else ' (transposed)'}" for t in inputs)
        cases.append(Case((chain, *inputs), f"{chain!r} on {shapes}, {str(dtype)[6:]}"))
    return cases


# ---------------------------------------------------------------- running a kernel stage in the pipeline


class NanFirst:
    """A compiled kernel that fills its outputs with NaN before running: an unwritten element shows. Its
    inputs are handed over at the start of buffers padded with NaN: a kernel that reads past an input's
    end (a broadcast input read at the full shape's offsets) reads NaN, the same at every run, not
    whatever memory lies there (so that the same mistake gives the same result, and is named)."""

    def __init__(self, kernel: Kernel, compiled: Any, pad: bool = False) -> None:
        self.kernel, self.compiled, self.pad = kernel, compiled, pad
        self.source = getattr(compiled, "source", "")

    def __call__(self, *tensors: torch.Tensor) -> None:
        count = len(self.kernel.inputs)
        padded = [self._padded(t) if self.pad else t for t in tensors[:count]]
        for t in tensors[count:]:
            t.fill_(math.nan)
        self.compiled(*padded, *tensors[count:])

    def _padded(self, t: torch.Tensor) -> torch.Tensor:
        if not t.is_floating_point() or not t.is_contiguous() or t.device.type == "meta":
            return t  # a view handed over as it is stays the wrapper's mistake, to be seen
        room = torch.full((t.numel() + math.prod(self.kernel.shape) + 64,), math.nan, dtype=t.dtype, device=t.device)
        inside = room[:t.numel()].view(t.shape)
        inside.copy_(t)
        return inside


def nan_first(backend: str) -> Callable[[Kernel], NanFirst]:
    def compile_kernel(kernel: Kernel) -> NanFirst:  # C reads raw memory: only there can a read overrun
        return NanFirst(kernel, load_backend(backend)(kernel), pad=backend == "c")
    compile_kernel.__qualname__ = backend
    return compile_kernel


def _eager(program: Callable[..., Any], *inputs: torch.Tensor) -> Any:
    return program(*inputs)


def _through_the_compiler(stage: str, backend: str) -> Callable[..., Any]:
    """Compile the case's program with ``stage`` replaced by the learner's function, run it once."""
    def call(learner_fn: Callable[..., Any], program: Callable[..., Any], *inputs: torch.Tensor) -> Any:
        calls = []

        def counted(kernel: Kernel) -> str:
            calls.append(kernel.name)
            return learner_fn(kernel)

        with tensorcraft.substitute(**{stage: counted}):
            compiled = tensorcraft.compile(program, backend=nan_first(backend))
            result = compiled(*inputs)  # while a substitute is in force, every call compiles and runs
        if not calls:
            raise RuntimeError(f"check bug: {program!r} compiled to no fused kernel, so {stage} was never called")
        return result
    return call


def _case(program: Program, *inputs: torch.Tensor, note: str = "") -> Case:
    shapes = ", ".join(f"{list(t.shape)}{'' if t.is_contiguous() else ' (transposed)'}" for t in inputs)
    return Case((program, *inputs), note or f"{program!r} on {shapes}")


# Your function only returns source text, so an input that changed was written by the compiled code it
# produced: that is all the check knows, and all it says.
COMPILED_CODE_WROTE_AN_INPUT = (
    "the compiled program wrote into one of its inputs: a kernel may write only its outputs, which come after "
    "its inputs in its parameters (run(*inputs, *outputs)); print your source and check which buffer each "
    "store goes to")

# ---------------------------------------------------------------- exercise 1: python_source

FORBIDDEN_PYTHON = ("tensorcraft.compiler.codegen.python.python_source.library",)


def _python_public() -> list[Group]:
    g = torch.Generator().manual_seed(10)
    r = lambda *shape, dtype=torch.float32: torch.randn(*shape, generator=g, dtype=dtype)  # noqa: E731
    return [
        Group("one fused chain, same shapes", [
            _case(Program("sigmoid(x * 2 + y) * tanh(x) - 0.1", _sigmoid_chain), r(4, 5), r(4, 5)),
            _case(Program("max(x, y) - min(x / 4, y) + |x|", _max_min), r(3, 7), r(3, 7)),
        ]),
        Group("broadcast inputs and a transposed input", [
            _case(Program("sigmoid(x * 2 + y) * tanh(x) - 0.1", _sigmoid_chain), r(4, 5), r(5)),
            _case(Program("gelu(x + y) * z - relu(y - 1/3)", _gelu_of_sum), r(2, 3, 4), r(3, 1), r(1, 4)),
            _case(Program("sigmoid(x * 2 + y) * tanh(x) - 0.1", _sigmoid_chain), r(5, 4).t(), r(4, 1)),
        ]),
        Group("float64: constants in the kernel's dtype", [
            _case(Program("gelu(x + y) * z - relu(y - 1/3)", _gelu_of_sum),
                  r(3, 4, dtype=torch.float64), r(4, dtype=torch.float64), r(3, 1, dtype=torch.float64)),
        ]),
        Group("two outputs from one kernel", [
            _case(Program("tanh(x*y + 0.5), (x*y + 0.5)^2 - x", _two_outputs), r(3, 4), r(4)),
        ]),
        Group("infinite constants", [
            _case(Program("min(2x, x + inf) + max(x + y, y - x - inf) + tanh(y)", _infinite_bounds), r(3, 4), r(4)),
        ]),
        Group("reductions over the last axis", [
            _case(Program("sum((x - y) * (x + y), -1, keepdim)", _row_sum), r(4, 6), r(6)),
            _case(Program("mean(sigmoid(x) * y, -1), amax(...) + 0.1", _row_mean_max), r(3, 5), r(3, 1)),
        ]),
    ]


def _python_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random elementwise chains (some reduced), broadcast and transposed inputs",
                  _chain_cases(g, 9, reductions=True))]


PYTHON_SOURCE = Exercise(
    id="nb10_code_generation.python_source",
    reference=_eager,
    public=_python_public,
    hidden=_python_hidden,
    hint="print `def <kernel.name>(<input names>, <output names>):`, then one line per statement "
         "(load: the input's name; const: torch.full((), value, dtype=torch.<kernel.dtype>, device=<an output>.device); "
         "an op: TORCH_OPS[op](args)), then for each output `<name>.copy_(<value>)`, or for a reduction "
         "`<name>.copy_(TORCH_REDUCTIONS[r](<value>.expand(<kernel.shape>), dim=-1, keepdim=True))`",
    forbidden=FORBIDDEN_PYTHON,
    extra_hints={
        SyntaxError: "the source you returned is not valid Python: print it and read it; every line of the body "
                     "starts with four spaces",
        KeyError: "the generated function must be called kernel.name exactly: the backend looks it up by that name",
        RecursionError: "you called python_source, which during the check is your own function: write the source yourself",
        RuntimeError: "torch refused a line of your kernel (the message says which): an output is written with "
                      "copy_, and a reduction keeps its axis (keepdim=True), as the output's shape has it",
    },
    call=_through_the_compiler("python_source", "python"),
    in_place_hint=COMPILED_CODE_WROTE_AN_INPUT,
)


def check_python_source(python_source, hidden: bool = False) -> None:
    """Check ``python_source(kernel) -> str``: models compiled with it give eager PyTorch's results."""
    PYTHON_SOURCE.check(python_source, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: c_source

FORBIDDEN_C = (
    "tensorcraft.compiler.codegen.c.c_source.library",
    "tensorcraft.compiler.codegen.c._Printer.source",
    "tensorcraft.compiler.codegen.c._Printer.flat_loop",
    "tensorcraft.compiler.codegen.c._Printer.blocked_loop",
    "tensorcraft.compiler.codegen.c._Printer.body",
    "tensorcraft.compiler.codegen.printer.KernelPrinter.statements",
)


def _c_public() -> list[Group]:
    g = torch.Generator().manual_seed(11)
    r = lambda *shape, dtype=torch.float32: torch.randn(*shape, generator=g, dtype=dtype)  # noqa: E731
    chain = Program("sigmoid(x * 2 + y) * tanh(x) - 0.1", _sigmoid_chain)
    return [
        Group("inputs of the kernel's full shape", [
            _case(chain, r(4, 5), r(4, 5)),
            _case(Program("max(x, y) - min(x / 4, y) + |x|", _max_min), r(7), r(7)),
            _case(chain, r(2, 3, 4), r(2, 3, 4)),
        ]),
        Group("broadcasting: a row, a column, a middle axis", [
            _case(chain, r(4, 5), r(5), note="y is one row [5], read again by every row"),
            _case(chain, r(4, 5), r(4, 1), note="y is one column [4, 1], one value per row"),
            _case(Program("gelu(x + y) * z - relu(y - 1/3)", _gelu_of_sum), r(2, 3, 4), r(3, 1), r(2, 1, 4)),
        ]),
        Group("a transposed input, float64, two outputs", [
            _case(chain, r(5, 4).t(), r(4, 1)),
            _case(Program("gelu(x + y) * z - relu(y - 1/3)", _gelu_of_sum),
                  r(3, 4, dtype=torch.float64), r(4, dtype=torch.float64), r(3, 1, dtype=torch.float64)),
            _case(Program("tanh(x*y + 0.5), (x*y + 0.5)^2 - x", _two_outputs), r(3, 4), r(4)),
        ]),
        Group("infinite constants", [
            _case(Program("min(2x, x + inf) + max(x + y, y - x - inf) + tanh(y)", _infinite_bounds), r(3, 4), r(4)),
            _case(Program("min(2x, x + inf) + max(x + y, y - x - inf) + tanh(y)", _infinite_bounds),
                  r(3, 4, dtype=torch.float64), r(4, dtype=torch.float64)),
        ]),
    ]


def _c_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random elementwise chains, broadcast and transposed inputs", _chain_cases(g, 8, reductions=False))]


C_SOURCE = Exercise(
    id="nb10_code_generation.c_source",
    reference=_eager,
    public=_c_public,
    hidden=_c_hidden,
    hint="one loop per axis of kernel.shape (i0 outermost); input b is read at the sum of i_d * stride_d over "
         "its own contiguous strides, with stride 0 where b.shape[d] == 1; outputs at the full shape's offset; "
         "one `const T v_<name> = ...;` per statement, in order",
    forbidden=FORBIDDEN_C,
    extra_hints={
        RecursionError: "you called c_source, which during the check is your own function: write the source yourself",
        AttributeError: "the compiled library has no function `kernel_<kernel.name>`: name the C function exactly that",
    },
    call=_through_the_compiler("c_source", "c"),
    cuda=False,  # C kernels run on the CPU; the GPU's kernels are Triton's
    in_place_hint=COMPILED_CODE_WROTE_AN_INPUT,
)


def check_c_source(c_source, hidden: bool = False) -> None:
    """Check ``c_source(kernel) -> str``: models compiled with it give eager PyTorch's results."""
    C_SOURCE.check(c_source, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: generate_wrapper

FORBIDDEN_WRAPPER = (
    "tensorcraft.compiler.codegen.wrapper.generate_wrapper.library",
    "tensorcraft.compiler.codegen.wrapper.generate_wrapper",
    "tensorcraft.compiler.codegen.wrapper._kernel_lines",
)


def _statements(source: str, name: str) -> list[ast.stmt]:
    """The top-level statements of the function ``name`` in ``source``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node.body
    raise ValueError(f"the wrapper's source defines no function {name!r}")


def free_problems(source: str, graph, plan: MemoryPlan, name: str = "forward") -> list[str]:
    """Sentences naming each intermediate the wrapper keeps past its last use: never deleted, or
    deleted only after a later value was allocated. Values in reusable slots need no ``del``."""
    body = _statements(source, name)
    assigned_at: dict[str, int] = {}
    deleted_at: dict[str, int] = {}
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    deleted_at.setdefault(target.id, i)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned_at.setdefault(node.id, i)
    nodes = graph.nodes
    users = graph.users()
    problems = []
    for d, dead in sorted(plan.frees_after.items()):
        own_outputs = {u for u in users[nodes[d]] if is_kernel_output(u)} if nodes[d].kind == "kernel" else set()
        later = [n for n in nodes[d + 1:] if n.kind == "call" and n not in plan.slot_of and n not in own_outputs]
        allocated = sorted((assigned_at[n.name], n.name) for n in later if n.name in assigned_at)
        for value in dead:
            if value.kind != "call" or value in plan.slot_of:
                continue
            if value.name not in deleted_at:
                problems.append(f"{value.name} is never deleted (its last use is {nodes[d].name})")
            elif allocated and deleted_at[value.name] > allocated[0][0]:
                problems.append(f"{value.name} is deleted only after {allocated[0][1]} is allocated "
                                f"(its last use is {nodes[d].name})")
    return problems


def slot_problems(source: str, plan: MemoryPlan, name: str = "forward") -> list[str]:
    """Sentences naming each value the plan put in a slot that the wrapper does not take from
    ``_slot<k>`` (the notebook's name for slot k, allocated once before ``def``)."""
    reads: dict[str, set[str]] = {}
    for stmt in _statements(source, name):
        if isinstance(stmt, ast.Assign):
            used = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    reads.setdefault(target.id, used)
    return [f"{value.name} is planned in slot {k} but is not a view of _slot{k}"
            for value, k in sorted(plan.slot_of.items(), key=lambda item: item[0].name)
            if f"_slot{k}" not in reads.get(value.name, set())]


def _with_frees(program: Callable[..., Any], *inputs: torch.Tensor) -> tuple[Any, list[str]]:
    """Eager's result, and no freeing or slot problem."""
    return program(*inputs), []


def _through_the_wrapper(learner_fn: Callable[..., Any], program: Callable[..., Any], *inputs: torch.Tensor):
    """Compile with the learner's generate_wrapper substituted in; return the result and the
    freeing problems found in each wrapper it generated."""
    generated = []

    def spy(graph, plan, kernels, name="forward"):
        code = learner_fn(graph, plan, kernels, name)
        generated.append((graph, plan, code, name))
        return code

    with tensorcraft.substitute(generate_wrapper=spy):
        backend = nan_first({"cpu": "c", "meta": "python"}.get(inputs[0].device.type, "triton"))
        result = tensorcraft.compile(program, backend=backend)(*inputs)
    problems = []
    for graph, plan, code, name in generated:
        problems += free_problems(code.source, graph, plan, name) + slot_problems(code.source, plan, name)
    return result, problems


def _wrapper_public() -> list[Group]:
    g = torch.Generator().manual_seed(12)
    r = lambda *shape, dtype=torch.float32: torch.randn(*shape, generator=g, dtype=dtype)  # noqa: E731
    mlp = Program("(gelu(x @ w1 + b1) * 0.5 + 0.25) @ w2", _mlp)
    heads = Program("relu(x @ w1 + b1) -> (tanh(h)/2 @ w2) * sum(h*h), mean(exp(tanh(h)/2))", _mlp_two_heads)
    return [
        Group("an MLP: extern matmuls around one fused kernel", [
            _case(mlp, r(4, 6), r(6, 8), r(8), r(8, 3)),
            _case(mlp, r(2, 6, dtype=torch.float64), r(6, 5, dtype=torch.float64), r(5, dtype=torch.float64),
                  r(5, 2, dtype=torch.float64)),
        ]),
        Group("two kernels, reductions, reused slots, two results", [
            _case(heads, r(5, 4), r(4, 6), r(6), r(6, 6)),
        ]),
        Group("a transposed input read by a kernel, an input returned as it is", [
            _case(Program("sigmoid(x.T * 2 + b1) @ w1 -> h/10 + tanh(h), w2", _transposed_input),
                  r(5, 3), r(5, 4), r(5), r(2, 2)),
        ]),
        Group("one elementwise chain", [
            _case(Program("sigmoid(x * 2 + y) * tanh(x) - 0.1", _sigmoid_chain), r(4, 5), r(5)),
        ]),
    ]


def _wrapper_meta() -> list[Group]:
    g = torch.Generator().manual_seed(13)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    return [Group("on the meta device: buffers on the inputs' device (shapes only, no GPU needed)", [
        _case(Program("sigmoid(x * 2 + y) * tanh(x) - 0.1", _sigmoid_chain), r(4, 5), r(5),
              note="one kernel whose output is returned (a fresh buffer), on meta tensors, run by the Python backend"),
        _case(Program("(gelu(x @ w1 + b1) * 0.5 + 0.25) @ w2", _mlp), r(4, 6), r(6, 8), r(8), r(8, 3),
              note="the MLP (its kernel's output in a slot) on meta tensors"),
    ])]


def _random_network(g: torch.Generator) -> Case:
    """x @ w1 + b1, a random chain, maybe a row sum, @ w2, maybe a second chain after it."""
    b, d, h, o = (2 + _draw(g, 5) for _ in range(4))
    dtype = (torch.float32, torch.float64)[_draw(g, 2)]
    first, second = _random_chain(g, 1), _random_chain(g, 1)
    summed, after = _draw(g, 2), _draw(g, 2)

    def network(x, w1, b1, w2):
        hidden = first(x @ w1 + b1)
        out = hidden @ w2
        if summed:
            out = out * hidden.sum(-1, keepdim=True)
        return second(out) if after else out

    text = (f"f=({first!r}) of x @ w1 + b1, then @ w2{', * row sums' if summed else ''}"
            f"{f', then {second!r}' if after else ''}")
    inputs = tuple(torch.randn(*s, generator=g).to(dtype) for s in ((b, d), (d, h), (h,), (h, o)))
    return Case((Program(text, network), *inputs), f"{text}; sizes b={b} d={d} h={h} o={o}, {str(dtype)[6:]}")


def _wrapper_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random networks of matmuls and fused chains", [_random_network(g) for _ in range(6)])]


GENERATE_WRAPPER = Exercise(
    id="nb10_code_generation.generate_wrapper",
    reference=_with_frees,
    public=_wrapper_public,
    hidden=_wrapper_hidden,
    hint="walk graph.nodes in order: a kernel node allocates each output (a slot view when plan.slot_of has it, "
         "else torch.empty of kernel.output_shape) and calls the kernel with its inputs made contiguous and "
         "reshaped to each buffer's shape; an ordinary call prints with the printer; the output node returns "
         "every value it lists; after node i, `del` the names in plan.frees_after[i] (kind 'call')",
    forbidden=FORBIDDEN_WRAPPER,
    extra_hints={
        ValueError: "a compiled kernel refused an argument, or the results did not match what the graph returns "
                    "(the message says which): each kernel input must be passed as "
                    "`<name>.contiguous().reshape(<buffer.shape>)`, each output allocated with the kernel's dtype and "
                    "kernel.output_shape(output), and the return tuple must list every value of the output node",
        NameError: "the wrapper used a name it has not assigned, or one it already deleted: delete a value only "
                   "after its last use, and bind every kernel and constant in the namespace",
        AttributeError: "return a WrapperCode(source, namespace, placeholder_indices, param_names): the pipeline "
                        "calls its load()",
        SyntaxError: "the wrapper's source is not valid Python: print it and read it",
        RecursionError: "you called generate_wrapper, which during the check is your own function",
        KeyError: "a lookup found nothing: `kernels` is keyed by the kernel node (`kernels[node]`), not by a "
                  "name, and `plan.slot_of` holds only the values the plan put in a slot (test `in` first)",
    },
    call=_through_the_wrapper,
    parts=("the compiled program's results", "problems with freeing and slots in your wrapper"),
    on_meta=_wrapper_meta,
    in_place_hint=COMPILED_CODE_WROTE_AN_INPUT,
)


def check_generate_wrapper(generate_wrapper, hidden: bool = False) -> None:
    """Check ``generate_wrapper(graph, plan, kernels, name)``: eager's results, every intermediate freed in time."""
    GENERATE_WRAPPER.check(generate_wrapper, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (PYTHON_SOURCE, C_SOURCE, GENERATE_WRAPPER)}
