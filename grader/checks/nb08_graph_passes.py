"""Checks for notebook 08 (graph passes): dead-code elimination, CSE, constant folding, conv+batchnorm.

Each pass the learner writes runs inside ``tensorcraft.compile``: the check compiles a small program (a
``programs.Program``, drawn as steps and shown as its source) with the learner's pass substituted for the
stage (``stages.run_stage``), so the pipeline calls the learner's pass, and compares

  * what the compiled code returns with what eager PyTorch returns (the numerics),
  * the calls left in the optimized graph (``compiled.compiled.optimized``) with the calls torch.fx's
    own pass leaves in the same program (``Graph.eliminate_dead_code``, ``CSEPass``,
    ``const_fold.split_const_subgraphs``), by canonical op name,
  * and what eager guarantees beyond values: two returned values are two tensors, a value that depends
    on a trainable parameter still has its gradient.

``fold_conv_bn`` is checked against ``torch.nn.utils.fusion.fuse_conv_bn_weights`` and then run inside the
library's ``fold_conv_batchnorm`` pass on a Conv2d -> BatchNorm2d model. While the learner's code runs,
torch.fx's passes, torch's conv-bn fusion and the library's own versions of each stage are tripwires.
"""
from __future__ import annotations

import operator
import warnings

import torch
import torch.fx
from torch import nn
from torch.fx.experimental import const_fold
from torch.fx.experimental.optimization import fuse as fx_fuse_conv_bn
from torch.fx.passes.dialect.common.cse_pass import CSEPass
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights

from tensorcraft.compiler.ir import Graph
from tensorcraft.compiler.opnames import canonical_name
from tensorcraft.compiler.passes import constant_folding, conv_bn, cse, dce

from .exercise import Case, Exercise, Group
from .programs import Program
from .seed import draw
from .stages import run_stage

# The pipeline's passes, held here before any tripwire replaces the module attributes: the compiled
# model calls these (the swappable stages), and the stage calls the learner's function in their place.
DCE_STAGE, CSE_STAGE = dce.eliminate_dead_code, cse.eliminate_common_subexpressions
FOLD_STAGE, CONV_BN_PASS = constant_folding.fold_constants, conv_bn.fold_conv_batchnorm

GRAPH_RULES_HINT = ("your pass returned a graph that breaks the IR's rules (the message names the node): keep the "
                    "output node last and every placeholder; change the node list only with graph.remove / "
                    "graph.replace / graph.replace_all_uses, which refuse to drop a node something still reads")

# ---------------------------------------------------------------- programs
#
# A program is drawn as steps (op, operand indices, extra) over a growing list of values that starts with the
# inputs x, y of shape (4, 6) and w of shape (6, 6) (for folding: x, and the parameters p (6, 6) and q (6,));
# ``as_program`` writes it as a programs.Program, whose source the learner reads and which runs eagerly, under
# torch.fx.symbolic_trace and under tensorcraft.compile.

SHAPE, WIDTH = (4, 6), 6
# A tensor the program reads from outside (a global): captured as a constant node, traced by torch.fx as a
# get_attr. It has no dimensions, so it combines with inputs on any device.
HALF = torch.tensor(0.5)
_SOURCE = {
    **{name: f"torch.{name}({{a}})" for name in ("sin", "tanh", "sigmoid", "relu", "neg", "abs")},
    "add": "{a} + {b}",
    "mul": "{a} * {b}",
    "sub": "{a} - {b}",
    "scale": "{a} * {extra!r}",                                 # x * 2.0: the number is an argument
    "shift": "{a} + {extra!r}",
    "matmul": "{a} @ {b}",
    "softmax": "torch.softmax({a}, {extra!r})",                 # the dim is an argument
    "gelu": "F.gelu({a}, approximate={extra!r})",               # "none" or "tanh": a keyword argument
    "stack_sum": "torch.stack([{a}, {b}]).sum(0)",              # operands inside a list
    "center": "{a} - {a}.mean({extra!r}, keepdim=True)",
    "round_trip": "{a}.to({extra}).to(torch.float32)",          # the dtype is an argument
    "by_half": "{a} * HALF",                                    # reads a constant tensor
    "int_scale": "(({a} * 4).round().to(torch.int64) * {extra!r})",  # integers times a number
    "arange": "torch.arange({width:.1f}, device=device) * {extra!r}",  # factories: constants when folding
    "ones": "torch.ones({width}, device=device) * {extra!r}",
}


def as_program(program, params: tuple[str, ...] = ("x", "y", "w")) -> Program:
    """(steps, outputs, n_inputs) as the function a learner would write: ``f(x, y, w)`` returning a tuple
    (for folding, ``params`` are x, p, q and the factories' device)."""
    steps, outputs, _ = program
    names = [p for p in params if p != "device"]
    lines = []
    for op, operands, extra in steps:
        operand = dict(zip("ab", (names[i] for i in operands)))
        lines.append(f"v{len(lines)} = " + _SOURCE[op].format(**operand, extra=extra, width=WIDTH))
        names.append(f"v{len(lines) - 1}")
    returned = ", ".join(names[i] for i in outputs)
    return Program((*lines, f"return ({returned},)" if len(outputs) == 1 else f"return {returned}"), params,
                   constants=(("HALF", HALF),))


def program_inputs(seed: int = 0, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(SHAPE, generator=g).to(dtype), torch.randn(SHAPE, generator=g).to(dtype),
            (torch.randn(WIDTH, WIDTH, generator=g) / WIDTH ** 0.5).to(dtype))


def _fx_calls(gm: torch.fx.GraphModule) -> list[str]:
    """Canonical names of fx's calls; const_fold's reads of its folded tuple (getitem of a get_attr) are
    constants, not calls."""
    return [canonical_name(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")
            and not (n.target is operator.getitem and getattr(n.args[0], "op", None) == "get_attr")]


def _our_calls(graph) -> list[str]:
    return [n.op for n in graph.nodes if n.kind == "call"]


def _fx_tensors_read(gm: torch.fx.GraphModule) -> str:
    return f"{sum(1 for n in gm.graph.nodes if n.op == 'get_attr')} constant or parameter node(s)"


def _our_tensors_read(graph) -> str:
    return f"{sum(1 for n in graph.nodes if n.kind in ('constant', 'param'))} constant or parameter node(s)"


def _shared_outputs(outputs) -> list[str]:
    """A sentence for each pair of returned tensors that share memory: eager returns none unless the program
    made views."""
    tensors = [t for t in outputs if isinstance(t, torch.Tensor)]
    return [f"outputs {i} and {j} share memory" for i in range(len(tensors)) for j in range(i + 1, len(tensors))
            if tensors[i].untyped_storage().data_ptr() == tensors[j].untyped_storage().data_ptr()]


def _compile_with(stage: str, learner_fn, fn, inputs, passes):
    """Compile ``fn`` with ``passes``, the learner's function substituted for ``stage``; run it once.
    Returns (what the compiled code returned, the optimized graph that substitute built)."""
    run = run_stage(stage, learner_fn, fn, inputs, compile_with={"passes": passes}, returns=(Graph,), what="a Graph",
                    required=False)
    built = run.compiled.compiled
    if built is None:  # capture refused: nothing was compiled, which no program here should cause
        raise RuntimeError(f"tensorcraft.compile ran eagerly: {run.compiled.explain()}")
    return run.result, built.optimized


# ---------------------------------------------------------------- exercise 1: dead-code elimination


def _dce_reference(program, inputs):
    gm = torch.fx.symbolic_trace(program.fn)
    gm.graph.eliminate_dead_code()
    return (program(*inputs), _fx_calls(gm), sum(1 for n in gm.graph.nodes if n.op == "placeholder"),
            _fx_tensors_read(gm))


def _dce_in_the_pipeline(learner_dce, program, inputs):
    out, graph = _compile_with("eliminate_dead_code", learner_dce, program.fn, inputs, [DCE_STAGE])
    return out, _our_calls(graph), len(graph.placeholders), _our_tensors_read(graph)


def _program_case(program, note: str = "", seed: int = 0) -> Case:
    """The inputs are arguments of the case, so that the check moves them to each device it runs on."""
    program = as_program(program)
    return Case((program, program_inputs(seed)), note or repr(program))


def _dce_public() -> list[Group]:
    return [
        Group("a dead value and a dead chain", [
            _program_case(((("sin", (0,), None), ("tanh", (0,), None), ("scale", (4,), 2.0)), (3,), 3),
                          "v0 = sin(x) is returned; tanh(x) * 2 is never read"),
            _program_case(((("relu", (0,), None), ("sigmoid", (3,), None), ("neg", (4,), None),
                            ("add", (0, 1), None)), (6,), 3),
                          "relu -> sigmoid -> neg: a chain of three dead calls"),
        ]),
        Group("inputs nothing reads stay (they are the signature)", [
            _program_case(((("sin", (0,), None), ("matmul", (3, 2), None)), (4,), 3), "y is never read"),
            _program_case(((("abs", (1,), None),), (3,), 3), "x and w are never read"),
        ]),
        Group("a constant tensor only dead code reads is dead too", [
            _program_case(((("by_half", (0,), None), ("by_half", (1,), None), ("neg", (0,), None)), (5,), 3),
                          "x * HALF and y * HALF (HALF a global tensor) are dead; -x is returned"),
        ]),
        Group("values read through a list, kept and dead", [
            _program_case(((("sin", (0,), None), ("tanh", (1,), None), ("stack_sum", (3, 4), None),
                            ("neg", (5,), None)), (5,), 3), "stack([sin(x), tanh(y)]).sum(0) is returned"),
        ]),
        Group("several outputs, some dead code between them", [
            _program_case(((("center", (0,), -1), ("softmax", (3,), 0), ("gelu", (3,), "tanh"),
                            ("mul", (4, 5), None), ("shift", (0,), 1.0)), (3, 6), 3),
                          "x - mean(x), its softmax times its gelu; x + 1 is dead"),
        ]),
    ]


_SIMPLE = ("sin", "tanh", "sigmoid", "relu", "neg", "abs", "add", "mul", "sub", "scale", "shift", "matmul",
           "softmax", "gelu", "stack_sum", "center")


def _random_step(g: torch.Generator, n_values: int):
    """One random step over values 0..n_values-1 (all of shape (4, 6) except w, index 2)."""
    full = [i for i in range(n_values) if i != 2]
    pick = lambda: full[draw(g, len(full))]  # noqa: E731
    op = _SIMPLE[draw(g, len(_SIMPLE))]
    if op in ("add", "mul", "sub", "stack_sum"):
        return op, (pick(), pick()), None
    if op == "matmul":
        return op, (pick(), 2), None
    if op == "scale":
        return op, (pick(),), (0.5, 2.0, -1.0)[draw(g, 3)]
    if op == "shift":
        return op, (pick(),), (1.0, -0.5)[draw(g, 2)]
    if op in ("softmax", "center"):
        return op, (pick(),), (0, -1)[draw(g, 2)]
    if op == "gelu":
        return op, (pick(),), ("none", "tanh")[draw(g, 2)]
    return op, (pick(),), None


def _random_program(g: torch.Generator, n_steps: int):
    steps = []
    for _ in range(n_steps):
        steps.append(_random_step(g, 3 + len(steps)))
    last = 3 + len(steps) - 1
    outputs = sorted({last, 3 + draw(g, len(steps))}) if draw(g, 2) else [last]
    return tuple(steps), tuple(outputs), 3


def _dce_hidden(g: torch.Generator) -> list[Group]:
    dead_constant = ((("by_half", (draw(g, 2),), None), ("tanh", (1,), None), ("sin", (0,), None),
                      ("add", (4, 5), None)), (6,), 3)
    return [Group("random programs", [_program_case(_random_program(g, 3 + draw(g, 6)), seed=draw(g, 1000))
                                      for _ in range(10)]),
            Group("a dead constant", [_program_case(dead_constant, seed=draw(g, 1000))])]


DCE = Exercise(
    id="nb08_graph_passes.eliminate_dead_code",
    reference=_dce_reference,
    public=_dce_public,
    hidden=_dce_hidden,
    hint="walk the nodes from the last to the first: the output node and the placeholders are live; a node is "
         "live when a live node reads it (node.inputs); remove every node that is not live (calls, constants, "
         "parameters) with graph.remove, on graph.copy()",
    forbidden=("torch.fx.Graph.eliminate_dead_code", "tensorcraft.compiler.passes.dce.eliminate_dead_code.library",
               "tensorcraft.compiler.passes.dce.eliminate_dead_code"),
    extra_hints={ValueError: GRAPH_RULES_HINT},
    call=_dce_in_the_pipeline,
    show=lambda program, inputs: repr(program),
    parts=("the compiled program's results", "the calls left (torch.fx's DCE keeps these)", "the number of inputs left"),
    truth_once=True,           # the library's pass on each public case: computed once per grading worker (checks/truths.py)
)


def check_eliminate_dead_code(eliminate_dead_code, hidden: bool = False) -> None:
    """Check a DCE pass inside tensorcraft.compile: eager's results, and the calls torch.fx's DCE keeps."""
    DCE.check(eliminate_dead_code, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: common subexpressions


def _cse_reference(program, inputs, against_fx: bool):
    outputs = program(*inputs)
    if not against_fx:
        return outputs, _shared_outputs(outputs)
    theirs = CSEPass()(torch.fx.symbolic_trace(program.fn)).graph_module
    return outputs, _shared_outputs(outputs), _fx_calls(theirs)


def _cse_in_the_pipeline(learner_cse, program, inputs, against_fx: bool):
    out, graph = _compile_with("eliminate_common_subexpressions", learner_cse, program.fn, inputs,
                               [CSE_STAGE])
    return (out, _shared_outputs(out)) + ((_our_calls(graph),) if against_fx else ())


def _cse_case(program, note: str = "", seed: int = 0, against_fx: bool = True) -> Case:
    program = as_program(program)
    return Case((program, program_inputs(seed), against_fx), note or repr(program))


def _cse_public() -> list[Group]:
    return [
        Group("the same call on the same values, computed twice", [
            _cse_case(((("sin", (0,), None), ("sin", (0,), None), ("add", (3, 4), None)), (5,), 3),
                      "sin(x) + sin(x)"),
            _cse_case(((("scale", (0,), 2.0), ("tanh", (3,), None), ("scale", (0,), 2.0), ("tanh", (5,), None),
                        ("mul", (4, 6), None)), (7,), 3), "tanh(x * 2) twice: the second chain merges call by call"),
        ]),
        Group("same op, different arguments: not the same value", [
            _cse_case(((("scale", (0,), 2.0), ("scale", (0,), 3.0), ("sub", (3, 4), None)), (5,), 3),
                      "x * 2 and x * 3"),
            _cse_case(((("softmax", (0,), 0), ("softmax", (0,), -1), ("add", (3, 4), None)), (5,), 3),
                      "softmax over dim 0 and over dim -1"),
            _cse_case(((("gelu", (0,), "none"), ("gelu", (0,), "tanh"), ("sub", (3, 4), None)), (5,), 3),
                      "gelu(x) and gelu(x, approximate='tanh'): a keyword argument differs"),
            _cse_case(((("sin", (0,), None), ("round_trip", (3,), torch.float16),
                        ("round_trip", (3,), torch.bfloat16), ("sub", (4, 5), None)), (6,), 3),
                      "v.to(torch.float16) and v.to(torch.bfloat16), each back to float32: a dtype differs"),
            _cse_case(((("sin", (0,), None), ("sin", (1,), None), ("stack_sum", (3, 4), None),
                        ("stack_sum", (4, 3), None), ("sub", (5, 6), None)), (7,), 3),
                      "stack([a, b]) and stack([b, a]): the order inside the list matters"),
            _cse_case(((("int_scale", (0,), 2), ("int_scale", (0,), 2.0), ("add", (3, 4), None)), (5,), 3),
                      "n * 2 and n * 2.0 with n = (x * 4).round().to(torch.int64): 2 == 2.0, yet the first is "
                      "int64 and the second float32", against_fx=False),  # fx's CSEPass merges them: eager decides
        ]),
        Group("two returned values stay two tensors", [
            _cse_case(((("sin", (0,), None), ("sin", (0,), None)), (3, 4), 3),
                      "return sin(x), sin(x): eager returns two tensors; a caller may change one in place",
                      against_fx=False),
            _cse_case(((("sin", (0,), None), ("sin", (0,), None), ("sin", (0,), None), ("neg", (3,), None)),
                       (4, 5, 6), 3),
                      "sin(x) three times, the last two returned: once the second merges into the first, the "
                      "first is returned", against_fx=False),
        ]),
    ]


def _random_cse_program(g: torch.Generator):
    """A random program, then copies of some of its steps (exact, or with another number or dim), all summed."""
    steps = list(_random_program(g, 2 + draw(g, 4))[0])
    for _ in range(2 + draw(g, 4)):
        op, operands, extra = steps[draw(g, len(steps))]
        if draw(g, 3) == 0 and op in ("scale", "shift", "softmax", "gelu", "center"):
            extra = {"scale": 3.0, "shift": 2.0, "softmax": 1, "gelu": "tanh", "center": 0}[op] \
                if extra != {"scale": 3.0, "shift": 2.0, "softmax": 1, "gelu": "tanh", "center": 0}[op] else \
                {"scale": 0.5, "shift": 1.0, "softmax": 0, "gelu": "none", "center": -1}[op]
        steps.append((op, operands, extra))
    total = 3
    for i in range(4, 3 + len(steps)):  # every value reaches the one output, so no two outputs are equal
        steps.append(("add", (total, i), None))
        total = 3 + len(steps) - 1
    return tuple(steps), (total,), 3


def _cse_hidden(g: torch.Generator) -> list[Group]:
    return [
        Group("random programs with repeated steps", [_cse_case(_random_cse_program(g), seed=draw(g, 1000))
                                                      for _ in range(8)]),
        Group("same op, different arguments", [_cse_case(_near_duplicates(g, op), seed=draw(g, 1000),
                                                         against_fx=op != "int_scale")
                                               for op in ("scale", "softmax", "gelu", "stack_sum", "round_trip",
                                                          "int_scale")]),
        Group("two returned values stay two tensors", [
            _cse_case(((("scale", (1,), 2.0), ("tanh", (3,), None), ("scale", (1,), 2.0), ("tanh", (5,), None)),
                       (4, 6), 3), against_fx=False),
            _cse_case(((("tanh", (1,), None), ("relu", (3,), None), ("tanh", (1,), None), ("tanh", (1,), None)),
                       (5, 4, 6), 3), against_fx=False),
        ]),
    ]


def _near_duplicates(g: torch.Generator, op: str):
    """op twice on the same random value with different arguments, the two results subtracted."""
    source = (0, 1)[draw(g, 2)]
    steps = [(("sin", "tanh", "sigmoid")[draw(g, 3)], (source,), None)]
    if op == "stack_sum":
        steps += [("neg", (source,), None), ("stack_sum", (3, 4), None), ("stack_sum", (4, 3), None)]
    else:
        first, second = {"scale": (0.5, -1.0), "softmax": (0, -1), "gelu": ("none", "tanh"),
                         "round_trip": (torch.float16, torch.bfloat16), "int_scale": (3, 3.0)}[op]
        if draw(g, 2) and op != "int_scale":  # int first: the merged result would be int64, not float32
            first, second = second, first
        steps += [(op, (3,), first), (op, (3,), second)]
    n = 3 + len(steps)
    steps.append(("add" if op == "int_scale" else "sub", (n - 2, n - 1), None))
    return tuple(steps), (n,), 3


CSE = Exercise(
    id="nb08_graph_passes.eliminate_common_subexpressions",
    reference=_cse_reference,
    public=_cse_public,
    hidden=_cse_hidden,
    hint="two call nodes are the same when their target and all their arguments are the same: earlier nodes by "
         "identity, numbers, strings, dims and keywords by type and value, lists item by item; keep the first, point the "
         "readers of the second at it (graph.replace_all_uses), then remove the second; two nodes that are both "
         "returned stay apart",
    forbidden=("torch.fx.passes.dialect.common.cse_pass.CSEPass",
               "tensorcraft.compiler.passes.cse.eliminate_common_subexpressions.library",
               "tensorcraft.compiler.passes.cse.eliminate_common_subexpressions"),
    extra_hints={ValueError: GRAPH_RULES_HINT},
    call=_cse_in_the_pipeline,
    show=lambda program, inputs, against_fx: repr(program),
    parts=("the compiled program's results", "the results that share memory", "the calls left (torch.fx's CSEPass keeps these)"),
    truth_once=True,           # the library's pass on each public case: computed once per grading worker (checks/truths.py)
)


def check_eliminate_common_subexpressions(eliminate_common_subexpressions, hidden: bool = False) -> None:
    """Check a CSE pass inside tensorcraft.compile: eager's results, and the calls torch.fx's CSEPass keeps."""
    CSE.check(eliminate_common_subexpressions, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: constant folding
#
# A module whose forward is a program over (x, self.p, self.q): p (6, 6) and q (6,) are parameters, and
# every step that reads only them (and factory calls such as torch.arange) can be folded in a frozen graph.

FOLD_PARAMS = ("x", "p", "q", "device")   # factories create their tensors on ``device``


class ProgramModule(nn.Module):
    """``forward(x)`` runs a program ``f(x, p, q, device)`` (``as_program(..., FOLD_PARAMS)``); p, q are parameters."""

    def __init__(self, program: Program, seed: int = 0, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.program = program
        self.p = nn.Parameter((torch.randn(WIDTH, WIDTH, generator=g) / WIDTH ** 0.5).to(dtype))
        self.q = nn.Parameter(torch.randn(WIDTH, generator=g).to(dtype))
        self.device = torch.device("cpu")  # where factories create their tensors: a plain attribute, as fx needs

    def forward(self, x):
        out = self.program.fn(x, self.p, self.q, self.device)
        return out[0] if len(out) == 1 else out


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def _fold_setup(program, seed: int, mode: str, x: torch.Tensor):
    """The module (parameters drawn from ``seed``) on x's device, and a copy of x to run it on."""
    model = ProgramModule(program, seed).to(x.device)
    model.device = x.device
    x = x.detach().clone()
    if mode != "grad":  # "frozen", "returned" and "baked": eval mode, no gradients
        model.eval().requires_grad_(False)
    else:
        x.requires_grad_(True)
    return model, x


def _live_params(graph) -> set[str]:
    """Names of the parameters the graph's output depends on (those only dead code reads are left out)."""
    live = {graph.output}
    for node in reversed(graph.nodes):
        if node in live:
            live.update(node.inputs)
    return {n.target for n in live if n.kind == "param"}


def _gradients(model, x, outputs) -> tuple:
    """d(sum of every output)/d(x, p, q); a missing gradient is None (what eager never gives here)."""
    total = sum(o.sum() for o in outputs)
    total.backward()
    return x.grad, model.p.grad, model.q.grad


def _fold_reference(program, seed: int, mode: str, x: torch.Tensor):
    model, x = _fold_setup(program, seed, mode, x)
    if mode == "grad":
        outputs = _as_tuple(model(x))
        return tuple(o.detach() for o in outputs), _gradients(model, x, outputs)
    with torch.no_grad():
        outputs = _as_tuple(model(x))
        if mode == "baked":  # no parameter folded away without being recorded: none unrecorded
            return outputs, []
        if mode == "returned":  # a second call returns fresh tensors
            return outputs, _shared_across_calls(outputs, _as_tuple(model(x)))
        with warnings.catch_warnings():  # const_fold warns about the attributes it creates
            warnings.simplefilter("ignore", UserWarning)
            folded = const_fold.split_const_subgraphs(model)
            folded.run_folding()
    return outputs, _fx_calls(folded)


def _shared_across_calls(first, second) -> list[str]:
    """A sentence for each output that two calls returned in the same memory (eager: none)."""
    return [f"output {i} is the same tensor at both calls" for i, (a, b) in enumerate(zip(first, second))
            if a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()]


def _fold_in_the_pipeline(learner_fold, program, seed: int, mode: str, x: torch.Tensor):
    model, x = _fold_setup(program, seed, mode, x)
    run = run_stage("fold_constants", learner_fold, model, (x,), compile_with={"passes": [FOLD_STAGE, DCE_STAGE]},
                    grad=mode == "grad", returns=(Graph,), what="a Graph", required=False)
    outputs, compiled = _as_tuple(run.result), run.compiled
    if mode == "grad":
        return tuple(o.detach() for o in outputs), _gradients(model, x, outputs)
    built = compiled.compiled
    if mode == "baked":  # parameters the optimized graph no longer reads, whose values it baked in unrecorded
        gone = _live_params(built.captured) - _live_params(built.optimized)
        return outputs, [f"{name} folded in without graph.param_value" for name in sorted(gone - built.optimized.baked)]
    if mode == "returned":  # the same compiled code, called again: eager's second call returns fresh tensors
        params = [operator.attrgetter(name)(model) for name in built.param_names]
        with torch.no_grad():
            again = _as_tuple(built.run([x], params))
        return outputs, _shared_across_calls(outputs, again)
    return outputs, _our_calls(built.optimized)


def _fold_case(steps, outputs, note: str, mode: str = "frozen", seed: int = 0) -> Case:
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(seed + 1))
    return Case((as_program((tuple(steps), tuple(outputs), 1), FOLD_PARAMS), seed, mode, x), f"{note} ({mode})")


# values: 0 = x (4, 6), 1 = p (6, 6), 2 = q (6,)
_FOLD_CHAIN = [("scale", (1,), 2.0), ("arange", (), 0.1), ("add", (3, 4), None), ("matmul", (0, 5), None),
               ("add", (6, 2), None)]


def _fold_public() -> list[Group]:
    return [
        Group("parameters and factories are constants in eval mode without gradients", [
            _fold_case([("tanh", (2,), None), ("sigmoid", (3,), None), ("mul", (0, 4), None)], (5,),
                       "x * sigmoid(tanh(q)): a chain of two constant calls"),
            _fold_case(_FOLD_CHAIN, (7,), "x @ (p * 2 + arange(6) * 0.1) + q: one matmul and one add are left"),
            _fold_case([("ones", (), 3.0), ("sub", (0, 3), None), ("softmax", (1,), -1), ("matmul", (4, 5), None)],
                       (6,), "(x - ones(6) * 3) @ softmax(p)"),
        ]),
        Group("values that depend on the input are computed at every call", [
            _fold_case([("sin", (0,), None), ("scale", (3,), 2.0), ("add", (4, 2), None)], (5,),
                       "sin(x) * 2 + q: only q is constant"),
            _fold_case([("center", (0,), -1), ("matmul", (3, 1), None), ("relu", (4,), None)], (5,),
                       "relu((x - mean(x)) @ p)"),
        ]),
        Group("with gradients, parameters are not constants", [
            _fold_case(_FOLD_CHAIN, (7,), "the first program again, its gradients with respect to x, p and q",
                       mode="grad"),
        ]),
        Group("a returned value is computed at every call", [
            _fold_case([("matmul", (0, 1), None), ("scale", (2,), 2.0)], (3, 4),
                       "return x @ p, q * 2: q * 2 reads constants only, yet each call must return a fresh "
                       "tensor (a caller may change it in place)", mode="returned"),
        ]),
        Group("a parameter folded into a constant is recorded (graph.param_value), so that the guards compare it", [
            _fold_case(_FOLD_CHAIN, (7,), "x @ (p * 2 + arange(6) * 0.1) + q: p is folded into a constant",
                       mode="baked"),
        ]),
    ]


def _random_fold_program(g: torch.Generator):
    """A few constant steps over p, q and factories, then steps mixing them with x; one output from x.
    Each value has a kind: "mat" (6, 6), "vec" (6,) or "x" (4, 6); steps combine only kinds that broadcast."""
    steps: list = []
    kinds = {1: "mat", 2: "vec"}

    def pick(kind: str | None = None) -> int:
        choices = [i for i, k in kinds.items() if kind is None and k != "x" or k == kind]
        return choices[draw(g, len(choices))]

    for _ in range(1 + draw(g, 4)):
        kind, source = draw(g, 5), pick()
        if kind == 0:
            steps.append((("arange", "ones")[draw(g, 2)], (), (0.5, 2.0)[draw(g, 2)]))
            kinds[3 + len(steps) - 1] = "vec"
            continue
        if kind == 1:
            steps.append((("tanh", "sigmoid", "neg", "abs")[draw(g, 4)], (source,), None))
        elif kind == 2:
            steps.append(("scale", (source,), (0.5, 2.0, -1.0)[draw(g, 3)]))
        elif kind == 3:
            steps.append(("softmax", (source,), (0, -1)[draw(g, 2)]))
        else:
            other = pick(kinds[source]) if draw(g, 2) else pick("vec")
            steps.append(("add", (source, other), None))
        kinds[3 + len(steps) - 1] = kinds[source]
    value = 0
    for _ in range(2 + draw(g, 3)):
        kind = draw(g, 3)
        if kind == 0:
            steps.append(("matmul", (value, pick("mat")), None))
        elif kind == 1:
            steps.append((("add", "mul", "sub")[draw(g, 3)], (value, pick("vec")), None))
        else:
            steps.append((("sin", "tanh", "relu")[draw(g, 3)], (value,), None))
        value = 3 + len(steps) - 1
        kinds[value] = "x"
    return steps, (value,)


def _fold_hidden(g: torch.Generator) -> list[Group]:
    programs = [_random_fold_program(g) for _ in range(6)]
    return [
        Group("random programs, frozen", [_fold_case(s, o, "random program", seed=draw(g, 1000))
                                          for s, o in programs]),
        Group("random programs, with gradients", [_fold_case(s, o, "random program", mode="grad",
                                                             seed=draw(g, 1000)) for s, o in programs[:2]]),
        Group("a returned value is computed at every call", [
            _fold_case([("sin", (0,), None), ("tanh", (2,), None), ("scale", (4,), 3.0)], (3, 5),
                       "return sin(x), tanh(q) * 3", mode="returned"),
        ]),
        Group("a parameter folded into a constant is recorded (graph.param_value), so that the guards compare it", [
            _fold_case(s, o, "random program", mode="baked", seed=draw(g, 1000)) for s, o in programs]),
    ]


FOLD = Exercise(
    id="nb08_graph_passes.fold_constants",
    reference=_fold_reference,
    public=_fold_public,
    hidden=_fold_hidden,
    hint="walk the nodes in order, keeping a dict node -> value of what is known at compile time: constants "
         "(node.target), parameters only when graph.frozen (graph.param_value(node)); a call whose inputs are "
         "all known, and that is not returned (returned_storages), is computed with torch.no_grad() and replaced "
         "by graph.constant(value) (graph.replace)",
    forbidden=("torch.fx.experimental.const_fold.split_const_subgraphs",
               "tensorcraft.compiler.passes.constant_folding.fold_constants.library",
               "tensorcraft.compiler.passes.constant_folding.fold_constants"),
    extra_hints={
        ValueError: GRAPH_RULES_HINT + "; graph.param_value raises outside a frozen graph: with gradients, "
                    "parameters are not constants",
        KeyError: "your pass computed a node whose inputs were not all known at compile time: a value that "
                  "depends on an input (a placeholder), directly or through other calls, must be computed at "
                  "every call; fold a call only when every one of node.inputs is known",
    },
    call=_fold_in_the_pipeline,
    show=lambda program, seed, mode, x: program.show((x,)),
    parts=("the compiled model's results",),
    truth_once=True,           # the library's pass on each public case: computed once per grading worker (checks/truths.py)
)


def check_fold_constants(fold_constants, hidden: bool = False) -> None:
    """Check a constant folder inside tensorcraft.compile: eager's results and gradients, and the calls
    torch.fx's const_fold leaves."""
    FOLD.check(fold_constants, hidden=hidden)


# ---------------------------------------------------------------- exercise 4: the conv + batchnorm arithmetic


def _conv_bn_model(weight, bias, running_mean, running_var, gamma, beta, eps) -> nn.Sequential:
    """Conv2d (no bias when ``bias`` is all zeros) -> BatchNorm2d in eval mode, holding the case's tensors."""
    out, cin, kh, kw = weight.shape
    has_bias = weight.device.type == "meta" or bool(bias.abs().sum() > 0)  # meta tensors hold no values
    conv = nn.Conv2d(cin, out, (kh, kw), padding=1, bias=has_bias).to(weight.dtype).to(weight.device)
    bn = nn.BatchNorm2d(out, eps=eps).to(weight.dtype).to(weight.device)
    with torch.no_grad():
        conv.weight.copy_(weight)
        if has_bias:
            conv.bias.copy_(bias)
        bn.running_mean.copy_(running_mean)
        bn.running_var.copy_(running_var)
        bn.weight.copy_(gamma)
        bn.bias.copy_(beta)
    return nn.Sequential(conv, bn).eval().requires_grad_(False)


def _image(weight) -> torch.Tensor:
    g = torch.Generator().manual_seed(int(weight.shape[0] * 10 + weight.shape[1]))
    return torch.randn(2, weight.shape[1], 5, 6, generator=g).to(weight.dtype).to(weight.device)


def _fold_conv_bn_reference(weight, bias, running_mean, running_var, gamma, beta, eps):
    w, b = fuse_conv_bn_weights(weight, bias, running_mean, running_var, eps, gamma, beta)
    model = _conv_bn_model(weight, bias, running_mean, running_var, gamma, beta, eps)
    with torch.no_grad():
        fused = fuse_conv_bn_eval(model[0], model[1])  # torch's own folded conv, on the same image
        left = sum(isinstance(m, nn.BatchNorm2d) for m in fx_fuse_conv_bn(model).modules())
        return w.detach(), b.detach(), fused(_image(weight)), left


class BroadcastError(RuntimeError):
    """torch refused to broadcast two shapes inside the learner's function (its message says which)."""


def _fold_conv_bn_in_the_pipeline(learner_fold, weight, bias, running_mean, running_var, gamma, beta, eps):
    """The learner's result, then the learner's function inside fold_conv_batchnorm on a Conv2d -> BatchNorm2d
    (only when the result has the kind of torch's: a new weight and bias of the inputs' shapes, dtype, device)."""
    model = _conv_bn_model(weight, bias, running_mean, running_var, gamma, beta, eps)
    try:
        got = learner_fold(weight, bias, running_mean, running_var, gamma, beta, eps)
    except RuntimeError as error:
        if "must match the size" in str(error):  # torch's own words when two shapes do not broadcast
            raise BroadcastError(str(error)) from None
        raise
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return got
    if any(not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype or g.device != e.device
           for g, e in zip(got, (weight, bias))):
        return got  # the comparison says what differs; the pipeline would only fail on it
    run = run_stage("fold_conv_bn", learner_fold, model, (_image(weight),), grad=False,
                    compile_with={"passes": [CONV_BN_PASS, DCE_STAGE]}, required=False)
    out, compiled = run.result, run.compiled
    return got[0], got[1], out, compiled.compiled.optimized.count(op="batch_norm")


def _bn_case(out: int, cin: int, k: tuple, dtype: torch.dtype, eps: float, g: torch.Generator,
             bias: bool = True, note: str = "") -> Case:
    kh, kw = k
    weight = torch.randn(out, cin, kh, kw, generator=g).to(dtype)
    conv_bias = torch.randn(out, generator=g).to(dtype) if bias else torch.zeros(out, dtype=dtype)
    mean = torch.randn(out, generator=g).to(dtype)
    var = (torch.rand(out, generator=g) * 2 + 0.05).to(dtype)
    gamma, beta = torch.randn(out, generator=g).to(dtype), torch.randn(out, generator=g).to(dtype)
    name = str(dtype).removeprefix("torch.")
    return Case((weight, conv_bias, mean, var, gamma, beta, eps),
                note or f"{out} filters of {cin} x {kh} x {kw}, {name}, eps={eps}")


def _bn_public() -> list[Group]:
    g = torch.Generator().manual_seed(8)
    return [
        Group("float32, eps 1e-5 and larger", [
            _bn_case(4, 3, (3, 3), torch.float32, 1e-5, g),
            _bn_case(3, 3, (3, 3), torch.float32, 0.1, g, note="as many filters as input channels, eps=0.1"),
            _bn_case(5, 2, (1, 3), torch.float32, 1e-3, g, note="5 filters of 2 x 1 x 3, eps=1e-3"),
        ]),
        Group("float64, and a convolution without bias (zeros)", [
            _bn_case(4, 4, (3, 3), torch.float64, 0.5, g, note="float64, eps=0.5"),
            _bn_case(3, 2, (3, 3), torch.float64, 0.01, g, bias=False, note="no conv bias: zeros, eps=0.01"),
            _bn_case(2, 3, (3, 2), torch.float32, 0.2, g, bias=False, note="no conv bias, float32, eps=0.2"),
        ]),
    ]


def _bn_meta() -> list[Group]:
    g = torch.Generator().manual_seed(80)
    return [Group("on the meta device: new tensors on the inputs' device", [
        _bn_case(3, 2, (3, 3), torch.float32, 1e-5, g, note="3 filters of 2 x 3 x 3, on meta (shapes only, no GPU needed)"),
    ])]


def _bn_hidden(g: torch.Generator) -> list[Group]:
    cases = []
    for i in range(8):
        out, cin = 1 + draw(g, 5), 1 + draw(g, 4)
        k = ((1, 3)[draw(g, 2)], (1, 2, 3)[draw(g, 3)])
        dtype = (torch.float32, torch.float64)[i % 2]
        eps = (1e-5, 1e-3, 0.05, 0.3)[draw(g, 4)]
        cases.append(_bn_case(out, cin, k, dtype, eps, g, bias=bool(draw(g, 3))))
    return [Group("random shapes, float32 and float64, eps", cases)]


FOLD_CONV_BN = Exercise(
    id="nb08_graph_passes.fold_conv_bn",
    reference=_fold_conv_bn_reference,
    public=_bn_public,
    hidden=_bn_hidden,
    hint="scale = gamma / sqrt(running_var + eps), one number per output channel; the weight is "
         "weight * scale[:, None, None, None] (filter o scaled by scale[o]); the bias is "
         "(bias - running_mean) * scale + beta",
    forbidden=("torch.nn.utils.fusion.fuse_conv_bn_weights", "torch.nn.utils.fuse_conv_bn_weights",
               "torch.nn.utils.fusion.fuse_conv_bn_eval", "torch.nn.utils.fuse_conv_bn_eval",
               "torch.fx.experimental.optimization.fuse",
               "tensorcraft.compiler.passes.conv_bn.fold_conv_bn.library"),  # the library's own, under any name
    extra_hints={BroadcastError: "two shapes do not broadcast: the scale has one number per output channel "
                                 "(weight's first axis); reshape it to (out, 1, 1, 1) to scale the weight"},
    call=_fold_conv_bn_in_the_pipeline,
    on_meta=_bn_meta,
    truth_once=True,           # the library's pass on each public case: computed once per grading worker (checks/truths.py)
)


def check_fold_conv_bn(fold_conv_bn, hidden: bool = False) -> None:
    """Check ``fold_conv_bn(weight, bias, running_mean, running_var, gamma, beta, eps) -> (weight, bias)``
    against torch's fuse_conv_bn_weights, and inside tensorcraft's conv+batchnorm pass."""
    FOLD_CONV_BN.check(fold_conv_bn, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (DCE, CSE, FOLD, FOLD_CONV_BN)}
