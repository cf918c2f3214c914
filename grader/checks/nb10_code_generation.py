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
from typing import Any, Callable

import torch

from tensorcraft.compiler.codegen.backends import load_backend
from tensorcraft.compiler.codegen.kernel import Kernel
from tensorcraft.compiler.passes.memory_plan import MemoryPlan, is_kernel_output

from .exercise import Case, Exercise, Group
from .programs import Program
from .programs import draw as draw_program
from .seed import draw, pick
from .stages import run_stage

# ---------------------------------------------------------------- the programs a case compiles (programs.Program)

SIGMOID_CHAIN = Program(("return torch.sigmoid(x * 2.0 + y) * torch.tanh(x) - 0.1",), ("x", "y"))
GELU_OF_SUM = Program(("return F.gelu(x + y) * z - torch.relu(y - 1.0 / 3.0)",), ("x", "y", "z"))
TWO_OUTPUTS = Program(("u = x * y + 0.5", "return torch.tanh(u), u * u - x"), ("x", "y"))
MAX_MIN = Program(("return torch.maximum(x, y) - torch.minimum(x * 0.25, y) + torch.abs(x)",), ("x", "y"))
INFINITE_BOUNDS = Program(("return torch.minimum(x * 2.0, x + math.inf) + torch.maximum(x + y, y - x - math.inf) "
                           "+ torch.tanh(y)",), ("x", "y"))
ROW_SUM = Program(("return ((x - y) * (x + y)).sum(-1, keepdim=True)",), ("x", "y"))
ROW_MEAN_MAX = Program(("v = torch.sigmoid(x) * y", "return v.mean(-1), v.amax(-1, keepdim=True) + 0.1"), ("x", "y"))
MLP = Program(("h = F.gelu(x @ w1 + b1) * 0.5 + 0.25", "return h @ w2"), ("x", "w1", "b1", "w2"))
MLP_TWO_HEADS = Program(("h = torch.relu(x @ w1 + b1)", "s = (h * h).sum(-1, keepdim=True)", "t = torch.tanh(h) * 0.5",
                         "return (t @ w2) * s, torch.exp(t).mean(-1)"), ("x", "w1", "b1", "w2"))
TRANSPOSED_INPUT = Program(("h = torch.sigmoid(x.t() * 2.0 + b1) @ w1", "return h * 0.1 + torch.tanh(h), w2"),
                           ("x", "w1", "b1", "w2"))


# ---------------------------------------------------------------- random elementwise chains (programs.draw)

UNARY = ("torch.sigmoid({})", "torch.tanh({})", "torch.relu({})", "torch.neg({})", "torch.abs({})", "torch.sin({})",
         "F.gelu({})", "F.silu({})", "torch.exp(torch.tanh({}))")
BINARY = ("torch.add({}, {})", "torch.sub({}, {})", "torch.mul({}, {})", "torch.maximum({}, {})",
          "torch.minimum({}, {})", "{} / (1.0 + torch.abs({}))")
CONSTANTS = (0.1, 1.0 / 3.0, -2.5, 0.75)
CHAIN_STEPS = (
    lambda g, v, values: pick(g, UNARY).format(v),
    lambda g, v, values: pick(g, BINARY).format(v, pick(g, values)),
    lambda g, v, values: pick(g, ("torch.add({}, {!r})", "torch.mul({}, {!r})", "torch.sub({}, {!r})")).format(
        v, pick(g, CONSTANTS)),
)
REDUCED = {None: "{}", "sum": "{}.sum(-1, keepdim=True)", "mean": "{}.mean(-1)"}


def _random_chain(g: torch.Generator, arity: int, reduce: str | None = None, params: tuple[str, ...] | None = None,
                  prefix: str = "v") -> Program:
    """A random elementwise program: every input joined first (so that the kernel reads each), then two to
    four unary, binary or constant steps on the last value; ``reduce``: its sum or mean over the last axis."""
    return draw_program(g, CHAIN_STEPS, 2 + draw(g, 3), params=params or tuple(f"x{i}" for i in range(arity)),
                        reach=1, join=CHAIN_STEPS[1], prefix=prefix,
                        returns=lambda g, values: REDUCED[reduce].format(values[-1]))


def _random_inputs(g: torch.Generator, arity: int, dtype: torch.dtype, min_rank: int = 1) -> tuple[torch.Tensor, ...]:
    """The first input has the full shape; the others broadcast (size-1 dims, fewer leading dims);
    rank-2+ inputs are sometimes a transpose (not contiguous)."""
    rank = min_rank + draw(g, 4 - min_rank)
    shape = [1 + draw(g, 6) for _ in range(rank)]
    inputs = []
    for i in range(arity):
        own = list(shape) if i == 0 else [1 if draw(g, 3) == 0 else n for n in shape][draw(g, rank):]
        own = own or [shape[-1]]
        if len(own) >= 2 and draw(g, 2):
            t = torch.randn(*reversed(own), generator=g).to(dtype).transpose(0, -1)
            inputs.append(t)
        else:
            inputs.append(torch.randn(*own, generator=g).to(dtype))
    return tuple(inputs)


def _chain_cases(g: torch.Generator, n: int, reductions: bool) -> list[Case]:
    cases = []
    for k in range(n):
        arity = 1 + draw(g, 3)
        reduce = ("sum", "mean")[draw(g, 2)] if reductions and k % 3 == 2 else None
        dtype = (torch.float32, torch.float64)[draw(g, 2)]
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


def _eager(program: Program, *inputs: torch.Tensor) -> Any:
    return program.truth(*inputs)


def _through_the_compiler(stage: str, backend: str) -> Callable[..., Any]:
    """Compile the case's program with ``stage`` replaced by the learner's function, run it once."""
    def call(learner_fn: Callable[..., Any], program: Program, *inputs: torch.Tensor) -> Any:
        run = run_stage(stage, learner_fn, program.fn, inputs, compile_with={"backend": nan_first(backend)},
                        required=False, returns=(str,), what="a str (the kernel's source)")
        if not run.calls:
            raise RuntimeError(f"check bug: {program!r} compiled to no fused kernel, so {stage} was never called")
        return run.result
    return call


def _show(program: Program, *inputs: torch.Tensor) -> str:
    return program.show(inputs)


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
            _case(SIGMOID_CHAIN, r(4, 5), r(4, 5)),
            _case(MAX_MIN, r(3, 7), r(3, 7)),
        ]),
        Group("broadcast inputs and a transposed input", [
            _case(SIGMOID_CHAIN, r(4, 5), r(5)),
            _case(GELU_OF_SUM, r(2, 3, 4), r(3, 1), r(1, 4)),
            _case(SIGMOID_CHAIN, r(5, 4).t(), r(4, 1)),
        ]),
        Group("float64: constants in the kernel's dtype", [
            _case(GELU_OF_SUM,
                  r(3, 4, dtype=torch.float64), r(4, dtype=torch.float64), r(3, 1, dtype=torch.float64)),
        ]),
        Group("two outputs from one kernel", [
            _case(TWO_OUTPUTS, r(3, 4), r(4)),
        ]),
        Group("infinite constants", [
            _case(INFINITE_BOUNDS, r(3, 4), r(4)),
        ]),
        Group("reductions over the last axis", [
            _case(ROW_SUM, r(4, 6), r(6)),
            _case(ROW_MEAN_MAX, r(3, 5), r(3, 1)),
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
    show=_show,
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
    chain = SIGMOID_CHAIN
    return [
        Group("inputs of the kernel's full shape", [
            _case(chain, r(4, 5), r(4, 5)),
            _case(MAX_MIN, r(7), r(7)),
            _case(chain, r(2, 3, 4), r(2, 3, 4)),
        ]),
        Group("broadcasting: a row, a column, a middle axis", [
            _case(chain, r(4, 5), r(5), note="y is one row [5], read again by every row"),
            _case(chain, r(4, 5), r(4, 1), note="y is one column [4, 1], one value per row"),
            _case(GELU_OF_SUM, r(2, 3, 4), r(3, 1), r(2, 1, 4)),
        ]),
        Group("a transposed input, float64, two outputs", [
            _case(chain, r(5, 4).t(), r(4, 1)),
            _case(GELU_OF_SUM,
                  r(3, 4, dtype=torch.float64), r(4, dtype=torch.float64), r(3, 1, dtype=torch.float64)),
            _case(TWO_OUTPUTS, r(3, 4), r(4)),
        ]),
        Group("infinite constants", [
            _case(INFINITE_BOUNDS, r(3, 4), r(4)),
            _case(INFINITE_BOUNDS,
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
    show=_show,
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


def _with_frees(program: Program, *inputs: torch.Tensor) -> tuple[Any, list[str]]:
    """Eager's result, and no freeing or slot problem."""
    return program.truth(*inputs), []


def _through_the_wrapper(learner_fn: Callable[..., Any], program: Program, *inputs: torch.Tensor):
    """Compile with the learner's generate_wrapper substituted in; return the result and the
    freeing problems found in each wrapper it generated."""
    backend = nan_first({"cpu": "c", "meta": "python"}.get(inputs[0].device.type, "triton"))
    def learners(graph, plan, kernels, name="forward"):  # called with the name, as the exercise states
        return learner_fn(graph, plan, kernels, name)

    run = run_stage("generate_wrapper", learners, program.fn, inputs, compile_with={"backend": backend},
                    required=False)
    problems = []
    for call in run.calls:
        graph, plan, _, *named = call.args
        name = named[0] if named else call.kwargs.get("name", "forward")
        source = call.returned.source
        problems += free_problems(source, graph, plan, name) + slot_problems(source, plan, name)
    return run.result, problems


def _wrapper_public() -> list[Group]:
    g = torch.Generator().manual_seed(12)
    r = lambda *shape, dtype=torch.float32: torch.randn(*shape, generator=g, dtype=dtype)  # noqa: E731
    mlp = MLP
    heads = MLP_TWO_HEADS
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
            _case(TRANSPOSED_INPUT,
                  r(5, 3), r(5, 4), r(5), r(2, 2)),
        ]),
        Group("one elementwise chain", [
            _case(SIGMOID_CHAIN, r(4, 5), r(5)),
        ]),
    ]


def _wrapper_meta() -> list[Group]:
    g = torch.Generator().manual_seed(13)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    return [Group("on the meta device: buffers on the inputs' device (shapes only, no GPU needed)", [
        _case(SIGMOID_CHAIN, r(4, 5), r(5),
              note="one kernel whose output is returned (a fresh buffer), on meta tensors, run by the Python backend"),
        _case(MLP, r(4, 6), r(6, 8), r(8), r(8, 3),
              note="the MLP (its kernel's output in a slot) on meta tensors"),
    ])]


def _random_network(g: torch.Generator) -> Case:
    """x @ w1 + b1, a random chain, maybe times its row sums after @ w2, maybe a second chain after it."""
    b, d, h, o = (2 + draw(g, 5) for _ in range(4))
    dtype = (torch.float32, torch.float64)[draw(g, 2)]
    first = _random_chain(g, 1, params=("a",), prefix="h")
    second = _random_chain(g, 1, params=("m",), prefix="u")
    summed, after = draw(g, 2), draw(g, 2)
    body = ["a = x @ w1 + b1", *first.body[:-1], f"hidden = {first.body[-1].removeprefix('return ')}", "m = hidden @ w2"]
    body += ["m = m * hidden.sum(-1, keepdim=True)"] if summed else []
    body += list(second.body) if after else ["return m"]
    inputs = tuple(torch.randn(*s, generator=g).to(dtype) for s in ((b, d), (d, h), (h,), (h, o)))
    return Case((Program(tuple(body), ("x", "w1", "b1", "w2")), *inputs),
                f"a random network; sizes b={b} d={d} h={h} o={o}, {str(dtype)[6:]}")


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
    show=_show,
    parts=("the compiled program's results", "problems with freeing and slots in your wrapper"),
    on_meta=_wrapper_meta,
    in_place_hint=COMPILED_CODE_WROTE_AN_INPUT,
)


def check_generate_wrapper(generate_wrapper, hidden: bool = False) -> None:
    """Check ``generate_wrapper(graph, plan, kernels, name)``: eager's results, every intermediate freed in time."""
    GENERATE_WRAPPER.check(generate_wrapper, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (PYTHON_SOURCE, C_SOURCE, GENERATE_WRAPPER)}
