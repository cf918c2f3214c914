"""Checks for notebook 07 (what torch.compile does, and graph capture).

Three stages of ``tensorcraft.compile``, each run inside the real pipeline with
``tensorcraft.substitute``:

* ``capture`` (the tracer): ground truth is torch.fx. The op sequence of the learner's graph must
  be fx's (``symbolic_trace`` through the modules, shapes propagated), its parameters must be the
  module tensors fx reads, and the code compiled from the graph must give eager's answers: once
  through ``tensorcraft.compile`` and once replayed on a *second* input (a graph that baked in a
  value or skipped an op gives itself away there).
* ``input_guard`` (the guard of one input, the stage ``check_input``): ground truth is Dynamo. A
  sequence of calls runs through ``torch.compile(dynamic=False)`` with a counting backend and through
  ``tensorcraft.compile`` with the learner's guard; at each call both must agree on "compiled anew"
  or "reused".
* ``refusal`` (which calls capture must not record): ground truth is ``torch._dynamo.explain``: a
  program Dynamo breaks into several graphs must make ``tensorcraft.compile`` fall back to eager,
  and one that Dynamo captures whole must compile, with eager's result. Random draws are the
  exception: Dynamo keeps them (it replays the generator's state), tensorcraft must refuse them.

While the learner's code runs, the library's own versions of the stage, capture's recorder and
torch.fx's tracing are tripwires.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import operator
from typing import Any, Callable, Iterator

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

import tensorcraft
from tensorcraft.compiler.capture import Captured
from tensorcraft.compiler.examples import MLP, Attention, ConvBNReLU, NormSoftmax
from tensorcraft.compiler.ir import Graph
from tensorcraft.compiler.opnames import canonical_name, is_inplace_name
from tensorcraft.compiler.pipeline import compile_graph

from . import truths
from .compare import describe
from .dynamo import without_guard_probe
from .exercise import Case, Exercise, Group
from .programs import Program
from .programs import draw as draw_program
from .seed import draw, pick
from .stages import run_stage, substituted

FX_TRACING = ("torch.fx.symbolic_trace", "torch.fx.Tracer.trace", "torch.fx._symbolic_trace.symbolic_trace")


@contextlib.contextmanager
def _quiet_dynamo() -> Iterator[None]:
    """Dynamo logs advice at every graph break; the check's own report is what the learner reads.
    Its guard-latency probe, which decides nothing, is skipped (``checks.dynamo``)."""
    logger = logging.getLogger("torch._dynamo")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with without_guard_probe():
            yield
    finally:
        logger.setLevel(level)


# ---------------------------------------------------------------- the programs the tracer runs on
#
# Each is a programs.Program: straight-line source text over x (a Python number k first, in one case), or a
# model of the zoo (``module``), which both sides build afresh on the inputs' device (``Program.build``).

ZOO = {"mlp": MLP, "cnn": ConvBNReLU, "norm_softmax": NormSoftmax, "attention": Attention}


def zoo_model(name: str, sizes: tuple, seed: int) -> torch.nn.Module:
    """ZOO[name](*sizes) with weights drawn from ``seed`` and non-trivial batch-norm statistics: float64, in eval mode."""
    torch.manual_seed(seed)
    model = ZOO[name](*sizes)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
    return model.double().eval()


def zoo_program(name: str, sizes: tuple, seed: int) -> Program:
    return Program((), name=f"{name}{sizes}", module=functools.partial(zoo_model, name, sizes, seed))


# the steps of a random program (programs.draw): (generator, operand, values so far) -> an expression
def _constant(g: torch.Generator, choices: tuple = (0.5, 2.0, -1.5)) -> float:
    return choices[draw(g, len(choices))]


STEPS = (
    lambda g, a, _: f"{pick(g, ('torch.tanh', 'torch.sigmoid', 'torch.relu', 'F.gelu'))}({a})",
    lambda g, a, _: f"{a}.{pick(g, ('sin', 'abs', 'neg', 'exp', 'cos'))}()",
    lambda g, a, _: pick(g, ("{a} * {c}", "{a} + {c}", "{c} - {a}", "{a} / {c}")).format(a=a, c=_constant(g)),
    lambda g, a, values: pick(g, ("{a} + {b}", "{a} * {b}", "{a} - {b}", "torch.maximum({a}, {b})")).format(
        a=a, b=values[draw(g, len(values))]),
    # in place, on a fresh intermediate (capture records the functional form)
    lambda g, a, _: f"{a}_t = {a} * {_constant(g, (0.5, 2.0))}\n"
                    f"{a}_t{pick(g, ('.relu_()', '.mul_(0.5)', ' += 1.5', '.sigmoid_()'))}\n{a}_t",
    lambda g, a, _: f"{a} - {a}.{pick(g, ('sum', 'mean', 'amax'))}(-1, keepdim=True)",  # broadcast back
    lambda g, a, _: f"{a}_1, {a}_2 = {a}.chunk(2, dim=-1)\ntorch.cat([{a}_2 * 2.0, {a}_1], dim=-1)",  # several results
    lambda g, a, _: f"{a}.reshape(-1).reshape({a}.shape).transpose(0, 1).transpose(0, 1)",
)


def _one_or_two(g: torch.Generator, values: list[str]) -> str:
    return values[-1] if draw(g, 2) else f"{values[-1]}, {values[draw(g, len(values) - 1)]}"


def random_program(g: torch.Generator, k: float | None = None) -> Program:
    """A random straight-line program over x of shape (rows, even width); with ``k``, a program of (k, x)
    that runs on x * k (a Python number before the tensor)."""
    program = draw_program(g, STEPS, 3 + draw(g, 5), reach=99, returns=_one_or_two)
    if k is None:
        return program
    return dataclasses.replace(program, body=("x = x * k", *program.body), params=("k", "x"), numbers=(("k", k),))


# ---------------------------------------------------------------- exercise 1: capture (ground truth: torch.fx)


class _IntoModules(torch.fx.Tracer):
    """Trace through nn.Linear & co., as capture does (it sees F.linear, not the module); batch norm
    stays a module (its forward branches on the input's rank), whose F.batch_norm capture records."""

    def is_leaf_module(self, m, qualname):
        return isinstance(m, torch.nn.modules.batchnorm._BatchNorm)


_REFLECTED = {operator.add: "radd", operator.sub: "rsub", operator.mul: "rmul", operator.truediv: "rdiv",
              operator.pow: "rpow"}
_BATCH_NORM_TENSORS = ("running_mean", "running_var", "weight", "bias")


def _fx_name(node: torch.fx.Node) -> str:
    """fx's op name as capture names it: `2 - x` is rsub, `t.relu_()` its functional form relu."""
    if node.op == "call_module":
        return "batch_norm"
    if node.target in _REFLECTED and not isinstance(node.args[0], torch.fx.Node):
        return _REFLECTED[node.target]
    name = canonical_name(node.target)
    return name[:-1] if is_inplace_name(name) else name


def fx_truth(program: Callable, *args: Any) -> tuple[list[str], list[str]]:
    """(the op sequence, the module tensors read) of ``program`` traced by torch.fx on ``args``."""
    root = program if isinstance(program, torch.nn.Module) else torch.nn.Module()
    graph_module = torch.fx.GraphModule(root, _IntoModules().trace(program))
    ShapeProp(graph_module).propagate(*args)
    ops, params = [], set()
    for node in graph_module.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module") and "tensor_meta" in node.meta:
            ops.append(_fx_name(node))  # calls that produce tensors (not shape reads)
        if node.op == "get_attr":
            params.add(node.target)
        if node.op == "call_module":
            params |= {f"{node.target}.{t}" for t in _BATCH_NORM_TENSORS}
    return ops, sorted(params)


def _capture_reference(program: Program, x: torch.Tensor, x2: torch.Tensor) -> tuple:
    fn = program.build(x.device)
    ops, params = fx_truth(fn, *program.arguments(x))
    with torch.no_grad():
        return ops, params, fn(*program.arguments(x)), fn(*program.arguments(x2))


def _module_tensors(program: Callable) -> dict[str, torch.Tensor]:
    if not isinstance(program, torch.nn.Module):
        return {}
    return dict(program.named_parameters()) | dict(program.named_buffers())


def _with_a_graph(*given_then_captured: Any) -> Captured:
    """The ``then`` of capture's recorder: a Captured (its type checked already) must hold a Graph."""
    captured = given_then_captured[-1]
    if not isinstance(captured.graph, Graph):
        raise TypeError(f"capture must return a Captured with a Graph in .graph, got {captured!r:.80}")
    return captured


def _through_compile(learner_capture: Callable, program: Program, x: torch.Tensor, x2: torch.Tensor) -> tuple:
    """tensorcraft.compile with the learner's tracer as its capture stage; then the graph it recorded,
    compiled again by the pipeline and replayed on a second input."""
    fn = program.build(x.device)
    with torch.no_grad():
        def learners(fn, args=(), kwargs=None, module=None):  # called as the exercise states, whatever the names
            return learner_capture(fn, args, kwargs, module)

        run = run_stage("capture", learners, fn, program.arguments(x), compile_with={"backend": "python"},
                        returns=(Captured,), what="a Captured with a Graph in .graph", then=_with_a_graph)
        first, captured = run.result, run.last.returned
        graph = captured.graph
        ops = [n.op for n in graph.nodes if n.kind == "call"]
        params = sorted(n.target for n in graph.params)
        tensors = _module_tensors(fn)
        replay = compile_graph(graph, backend="python")
        second = replay.run(list(program.arguments(x2)), [tensors[name] for name in replay.param_names])
    return ops, params, first, second


def _capture_case(program: Program, shape: tuple, g: torch.Generator, note: str) -> Case:
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    x2 = torch.randn(*shape, generator=g, dtype=torch.float64)
    return Case((program, x, x2), note)


def _capture_public() -> list[Group]:
    g = torch.Generator().manual_seed(7)
    operators = Program(("v1 = x.sin()", "v2 = 2.0 - v1", "v3 = v2 * x", "v4 = torch.tanh(v3)", "v5 = v4 / 3.0",
                         "return v5"))
    number_first = Program(("v0 = x * k", "v1 = v0.sin()", "v2 = v1 * v0", "return v2"), ("k", "x"),
                           numbers=(("k", 3.0),))
    inplace = Program(("v1 = x * 2.0", "v2 = v1 * 0.5", "v2.relu_()", "v3 = v2 * 1.0", "v3 += 1.5", "v4 = v3 + x",
                       "return v4"))
    several = Program(("first, second = x.chunk(2, dim=-1)", "v1 = torch.cat([second * 2.0, first], dim=-1)",
                       "v2 = v1 - v1.amax(-1, keepdim=True)",
                       "v3 = v2.reshape(-1).reshape(v2.shape).transpose(0, 1).transpose(0, 1)", "return v3, v1"))
    return [
        Group("functions, methods and operators", [
            _capture_case(operators, (3, 4), g, "x.sin(), 2 - v, v * x, torch.tanh, v / 3"),
        ]),
        Group("a Python number among the arguments: placeholders are numbered over every argument", [
            _capture_case(number_first, (3, 4), g, "f(k, x) called as f(3.0, x): v = x * k; v.sin() * v"),
        ]),
        Group("in-place updates of intermediates (t.relu_(), t += 1)", [
            _capture_case(inplace, (3, 4), g, "t = x * 2; t.relu_(); t += 1.5; t + x"),
        ]),
        Group("calls with several results, reductions, views, two outputs", [
            _capture_case(several, (2, 6), g, "chunk, cat, amax, reshape, transpose"),
        ]),
        Group("models: parameters become param nodes", [
            _capture_case(zoo_program("mlp", (16, 32, 8), 0), (4, 16), g, "MLP: Linear, GELU, Linear"),
            _capture_case(zoo_program("cnn", (3, 8, 5), 1), (2, 3, 8, 8), g,
                          "Conv, BatchNorm, ReLU(inplace=True), twice; mean; Linear"),
            _capture_case(zoo_program("attention", (16, 2), 2), (2, 5, 16), g, "attention with einsum and reshapes"),
        ]),
    ]


def _random_model(g: torch.Generator) -> tuple[Program, tuple]:
    """A model of the zoo of random sizes, and the shape of its input."""
    name = sorted(ZOO)[draw(g, len(ZOO))]
    seed = draw(g, 1000)
    if name == "mlp":
        d_in, hidden, d_out = 2 + draw(g, 8), 2 + draw(g, 8), 1 + draw(g, 6)
        return zoo_program(name, (d_in, hidden, d_out), seed), (1 + draw(g, 4), d_in)
    if name == "cnn":
        channels, width, classes = 1 + draw(g, 3), 2 + draw(g, 4), 2 + draw(g, 3)
        return zoo_program(name, (channels, width, classes), seed), (1 + draw(g, 2), channels, 3 + draw(g, 4), 4)
    if name == "norm_softmax":
        d = 2 + draw(g, 10)
        return zoo_program(name, (d,), seed), (1 + draw(g, 3), 2 + draw(g, 3), d)
    heads = 1 + draw(g, 3)
    d = heads * (2 + draw(g, 3))
    return zoo_program(name, (d, heads), seed), (1 + draw(g, 2), 2 + draw(g, 4), d)


def _capture_hidden(g: torch.Generator) -> list[Group]:
    programs = []
    for _ in range(6):
        width = 2 * (1 + draw(g, 3))
        program = random_program(g)
        programs.append(_capture_case(program, (1 + draw(g, 4), width), g,
                                      "a random straight-line program"))
    k = (2, 0.5, -1.5)[draw(g, 3)]
    program = random_program(g, k)
    programs.append(_capture_case(program, (1 + draw(g, 4), 2), g,
                                  f"f(k, x) called with k = {k}: a random program on x * k"))
    models = []
    for _ in range(3):
        program, shape = _random_model(g)
        models.append(_capture_case(program, shape, g, f"{program.name} on input {list(shape)}"))
    return [Group("random straight-line programs", programs), Group("models of random sizes", models)]


CAPTURE = Exercise(
    id="nb07_graph_capture.capture",
    reference=_capture_reference,
    public=_capture_public,
    hidden=_capture_hidden,
    hint="the result is (op sequence, module tensors read, compiled result on x, replayed result on a second "
         "input): record every call the mode sees with builder.call, bind each tensor it returns to the node "
         "it got back (and args[0] to `updated` after an in-place call), and map a tensor you have not seen "
         "to a param node (a module tensor) or a constant",
    forbidden=("tensorcraft.compiler.capture.capture.library", "tensorcraft.compiler.capture.capture",
               "tensorcraft.compiler.capture._Recorder", "tensorcraft.compiler.dynamo_backend.graph_from_fx.library",
               "tensorcraft.compiler.dynamo_backend.graph_from_fx",
               *FX_TRACING),
    extra_hints={
        TypeError: "capture must return Captured(graph, None, result, constants, input_names): the Graph "
                   "of builder.graph after builder.output(...), and the eager result of the call",
        KeyError: "every tensor the program reads must map to a node: the inputs to placeholders before the "
                  "call, module tensors to param nodes (by their qualified names), other tensors to constants",
    },
    call=_through_compile,
    parts=("the op sequence", "the module tensors read", "the compiled result on x", "the replayed result on a second input"),
)


def check_capture(capture, hidden: bool = False) -> None:
    """Check ``capture(fn, args, kwargs, module) -> Captured`` against torch.fx, run as tensorcraft.compile's capture."""
    CAPTURE.check(capture, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: the guard of one input (ground truth: Dynamo)


SCALED = Program(("return x * k + 1",), ("x", "k"), name="scaled")  # every guard case's program


def dynamo_compiles(calls: list[tuple]) -> list[bool]:
    """For each call of ``calls``, did torch.compile (dynamic=False) compile anew?"""
    import torch._dynamo

    torch._dynamo.reset()
    count = [0]

    def counting(graph_module, example_inputs):
        count[0] += 1
        return graph_module.forward

    compiled = torch.compile(SCALED.fn, backend=counting, dynamic=False)
    anew = []
    with _quiet_dynamo():
        for args in calls:
            before = count[0]
            compiled(*args)
            anew.append(count[0] > before)
    torch._dynamo.reset()
    return anew


class OnMeta:
    """A tensor that a case sends to the ``meta`` device (a device change without a GPU). It travels as
    this wrapper: a check copies a case's tensors and moves them to each device, which meta data cannot do."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        return f"tensor(shape={tuple(self.tensor.shape)}, dtype={str(self.tensor.dtype)[6:]}, device=meta)"


def _real(calls: list[tuple]) -> list[tuple]:
    return [tuple(a.tensor.to("meta") if isinstance(a, OnMeta) else a for a in args) for args in calls]


def _guard_reference(calls: list[tuple]) -> list[bool]:
    return dynamo_compiles(_real(calls))


def _through_the_cache(learner_guard: Callable, calls: list[tuple]) -> list[bool]:
    """The same calls through tensorcraft.compile with the learner's guard deciding every cache hit."""
    compiled = tensorcraft.compile(SCALED.fn, backend="python")
    anew = []
    with substituted("check_input", learner_guard, name="input_guard", returns=(str, type(None)),
                     what="None or a str (the reason)") as spy:
        for args in _real(calls):
            before = compiled.stats.compiles
            try:
                compiled(*args)
            except RuntimeError:  # an entry reused for inputs it was not built for may fail to run
                if spy.errors:    # the learner's own error (NotImplementedError too): reported as theirs
                    raise spy.errors[0] from None
            anew.append(compiled.stats.compiles > before)
    return anew


def _guard_case(calls: list[tuple], note: str) -> Case:
    return Case((calls,), note)


def _guard_public() -> list[Group]:
    g = torch.Generator().manual_seed(70)
    x = torch.randn(4, 3, generator=g)
    other = torch.randn(4, 3, generator=g)
    return [
        Group("the same kind of input is reused", [
            _guard_case([(x, 2), (other, 2), (x.clone(), 2)], "new values, same shape, dtype, strides"),
        ]),
        Group("tensor changes that must recompile", [
            _guard_case([(x, 2), (torch.randn(5, 3, generator=g), 2)], "shape (4, 3) -> (5, 3)"),
            _guard_case([(x, 2), (torch.randn(3, 4, generator=g), 2)], "shape (4, 3) -> (3, 4): same number of dims"),
            _guard_case([(x, 2), (x.double(), 2)], "dtype float32 -> float64"),
            _guard_case([(x, 2), (torch.randn(3, 4, generator=g).t(), 2)], "same shape, transposed strides"),
            _guard_case([(torch.randn(3, 4, generator=g).t(), 2), (torch.randn(1, 3, generator=g).expand(4, 3), 2)],
                        "transposed, then a broadcast row (expand): both non-contiguous, other strides"),
            _guard_case([(torch.randn(4, 1, generator=g), 2), (torch.randn(1, 4, generator=g).t(), 2)],
                        "shape (4, 1), strides (1, 1) -> (1, 4): the stride of a size-1 axis"),
            _guard_case([(x, 2), (other.clone().requires_grad_(), 2)], "requires_grad False -> True"),
            _guard_case([(x, 2), (OnMeta(x), 2)], "device cpu -> meta"),
        ]),
        Group("plain Python arguments: value and type", [
            _guard_case([(x, 2), (x, 3)], "k = 2 -> 3"),
            _guard_case([(x, 2), (x, 2.0)], "k = 2 -> 2.0 (2 == 2.0 in Python)"),
            _guard_case([(x, 1), (x, True)], "k = 1 -> True (1 == True in Python)"),
        ]),
        Group("a sequence of calls: each kind compiled once", [
            _guard_case([(x, 2), (torch.randn(5, 3, generator=g), 2), (other, 2), (x.double(), 2), (x, 2)],
                        "back to a known kind reuses its entry"),
        ]),
    ]


def _random_change(g: torch.Generator, x: torch.Tensor | OnMeta, k: Any) -> tuple[tuple, str]:
    if isinstance(x, OnMeta):
        return (x.tensor, k), "device meta -> cpu"
    kind = draw(g, 10)
    if kind == 0:
        return (torch.randn(*x.shape, generator=g).to(x.dtype), k), "new values"
    if kind == 1:
        shape = list(x.shape)
        shape[draw(g, len(shape))] += 1 + draw(g, 2)
        return (torch.randn(*shape, generator=g).to(x.dtype), k), f"shape -> {shape}"
    if kind == 2:
        return (x.reshape(x.shape[::-1]).clone() if x.dim() == 2 else x.reshape(-1), k), "same numel, other shape"
    if kind == 3:
        dtype = (torch.float64, torch.float16, torch.bfloat16)[draw(g, 3)]
        return (x.to(dtype), k), f"dtype -> {dtype}"
    if kind == 4 and x.dim() == 2:
        return (torch.randn(*x.shape[::-1], generator=g).to(x.dtype).t(), k), "transposed strides"
    if kind == 5:
        return (x.detach().clone().requires_grad_(not x.requires_grad), k), "requires_grad flipped"
    if kind == 6:
        return (x, k + 1 if not isinstance(k, bool) else (not k)), "k changed value"
    if kind == 7:
        return (x, float(k) if isinstance(k, int) and not isinstance(k, bool) else int(k)), "k changed type"
    if kind == 8 and x.dim() >= 2:
        row = torch.randn(1, *x.shape[1:], generator=g).to(x.dtype)
        return (row.expand(x.shape), k), "a broadcast row (expand, stride 0)"
    return (OnMeta(x), k), "device -> meta"


def _guard_hidden(g: torch.Generator) -> list[Group]:
    cases = []
    for _ in range(6):
        shape = tuple(1 + draw(g, 4) for _ in range(1 + draw(g, 3)))
        x = torch.randn(*shape, generator=g)
        k = (2, 3, 0.5, True)[draw(g, 4)]
        calls, notes = [(x, k)], []
        for _ in range(1 + draw(g, 3)):
            base = calls[draw(g, len(calls))]
            args, note = _random_change(g, *base)
            calls.append(args)
            notes.append(note)
        cases.append(_guard_case(calls, "; ".join(notes)))
    return [Group("random sequences of changed inputs", cases)]


INPUT_GUARD = Exercise(
    id="nb07_graph_capture.input_guard",
    reference=_guard_reference,
    public=_guard_public,
    hidden=_guard_hidden,
    hint="the result lists, call by call, whether the call compiled anew (True) or reused an entry (False), "
         "as torch.compile decides: a tensor is reused only if its shape, strides, dtype, device and "
         "requires_grad are all the remembered ones; a plain value only if it has the same type and value",
    # the stages themselves stay: the pipeline calls them (calling one from inside yours recurses, and fails)
    forbidden=("tensorcraft.compiler.guards.check_input.library", "tensorcraft.compiler.guards.check_guards.library",
               "tensorcraft.compiler.guards._input_matches",
               "tensorcraft.compiler.guards._difference"),
    extra_hints={
        TypeError: "return None when the input may reuse the entry, else a str saying what changed "
                   "(e.g. 'input x: dtype torch.float64 != torch.float32')",
        IndexError: "remembered is ('tensor', type, shape, stride, dtype, device, requires_grad) for a tensor and "
                    "('value', type, value) for a plain value: look at remembered[0] before reading the others",
    },
    call=_through_the_cache,
    truth_once=True,           # Dynamo on each public case: computed once per grading worker (checks/truths.py)
    show=lambda calls: f"{len(calls)} calls, on " + "; then ".join(describe(c, 70) for c in calls),
    parts=tuple(f"whether call {i} compiled anew" for i in range(1, 100)),
)


def check_input_guard(input_guard, hidden: bool = False) -> None:
    """Check ``input_guard(name, value, remembered) -> str | None`` against torch.compile's recompiles."""
    INPUT_GUARD.check(input_guard, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: what capture must refuse (ground truth: Dynamo's graph breaks)

# Programs over one tensor (the expression each returns); those that read values into Python break Dynamo's
# graph, the others do not.
BREAKING = {
    "branch on a value": "x * 2 if x.sum() > 0 else x - 1",
    "x.max().item()": "x * x.max().item()",
    "int(x.argmax())": "x * int(x.argmax())",
    "float(x.mean())": "x + float(x.mean())",
    "boolean mask x[x > 0]": "x[x > 0].sum() + x",
    "torch.unique": "torch.unique(x.round()).sum() + x",
    "x.masked_select(mask)": "x.masked_select(x > 0).sum() + x",
    "boolean mask in a tuple x[:, x[0] > 0]": "x[:, x[0] > 0].sum() + x",
    "range(x.argmax())": "x * len(range(x.argmax()))",
}
# Not among them: `while x.abs().max() > 1: x = x / 2`. When the loop body never runs, Dynamo's explain
# counts no graph break (the condition is the last thing the function does), so its answer depends on
# the input's values, and a check could not say what the learner's rule should give.
WHOLE = {
    "arithmetic": "torch.relu(x) * 3 + x.mean()",
    "branch on the shape": "x * 2 if x.shape[0] > 2 else x - 1",
    "x.size(0), x.dim()": "x.reshape(x.size(0), -1).sum(1) * x.dim()",
    "dropout in eval mode": "F.dropout(x, 0.5, training=False) + 1",
    "indexing with ints and slices": "x[0] + x[:, 1:].sum()",
    "softmax and matmul": "x.softmax(-1) @ x.transpose(-1, -2)",
    "x.numel() and len(x)": "x / x.numel() + len(x)",
    "torch.where on values": "torch.where(x > 0, x, -x)",
    "integer index tensor x[x[:, 0].argsort()]": "x[x[:, 0].argsort()] * 2 + x",
    "integer index tensor in a tuple x[:, x[0].argsort()]": "x[:, x[0].argsort()] - x",
}
# Programs that draw random numbers. Dynamo keeps them in one graph (it replays the generator's state);
# tensorcraft's graphs cannot: a replayed graph would draw as the compiled code does, and CSE would merge
# two draws into one (x + rand_like(x) - rand_like(x) would return x). So capture refuses them: the
# ground truth here is "runs eagerly, with eager's numbers", not Dynamo's answer.
RANDOM = {
    "two draws x + rand_like(x) - rand_like(x)": "x + torch.rand_like(x) - torch.rand_like(x)",
    "torch.randn(x.shape)": "x * torch.randn(x.shape, dtype=x.dtype, device=x.device)",
    "torch.bernoulli(p)": "torch.bernoulli(torch.sigmoid(x)) * x",
}
PROGRAMS = {name: Program((f"return {expression}",)) for name, expression in (BREAKING | WHOLE | RANDOM).items()}


@contextlib.contextmanager
def _seeded(device: torch.device) -> Iterator[None]:
    """The generator of ``device`` seeded with 0, its state restored afterwards: eager and the compiled
    program draw the same numbers, and the learner's own generator is left as it was."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(0)
        yield


def canonical_input() -> torch.Tensor:
    """The input of the public cases (4 x 3, values of both signs)."""
    return torch.randn(4, 3, generator=torch.Generator().manual_seed(77)) * 3


def dynamo_breaks(name: str, x: torch.Tensor | None = None) -> bool:
    """Does Dynamo break PROGRAMS[name] into more than one graph on ``x`` (default: :func:`canonical_input`)?
    For the programs here the answer is the program's alone, whatever the input's size and values
    (``tests/grader/test_nb07_checks.py`` checks it over the sizes and signs the hidden cases draw):
    so the checks ask once per program (``truths.shared``)."""
    import torch._dynamo

    x = canonical_input() if x is None else x

    torch._dynamo.reset()
    with _quiet_dynamo():
        explanation = torch._dynamo.explain(PROGRAMS[name].fn)(x)
    torch._dynamo.reset()
    return explanation.graph_break_count > 0


def _refusal_reference(name: str, x: torch.Tensor) -> tuple[bool, Any]:
    if name in RANDOM:
        breaks = True
    elif x.device.type == "cpu":        # the program's answer (dynamo_breaks), kept once per grading worker
        breaks = truths.shared(REFUSAL, name, functools.partial(dynamo_breaks, name))
    else:
        breaks = dynamo_breaks(name, x)
    with torch.no_grad(), _seeded(x.device):
        return breaks, PROGRAMS[name].fn(x)


def _through_capture(learner_refusal: Callable, name: str, x: torch.Tensor) -> tuple[bool, Any]:
    """tensorcraft.compile with the learner's refusal: (did the call run eagerly?, its result)."""
    with _seeded(x.device):
        run = run_stage("refusal", learner_refusal, PROGRAMS[name].fn, (x,), compile_with={"backend": "python"},
                        grad=False, required=False, returns=(str, type(None)), what="None or a str (the reason)")
    return run.compiled.stats.compiles == 0, run.result


def _refusal_case(name: str, x: torch.Tensor) -> Case:
    return Case((name, x), name)


def _refusal_public() -> list[Group]:
    x = canonical_input()
    return [
        Group("reading a value into Python", [_refusal_case(n, x) for n in
                                               ("branch on a value", "x.max().item()", "int(x.argmax())",
                                                "float(x.mean())", "range(x.argmax())")]),
        Group("a result whose shape depends on the values", [_refusal_case(n, x) for n in
                                                             ("torch.unique", "boolean mask x[x > 0]",
                                                              "boolean mask in a tuple x[:, x[0] > 0]")]),
        Group("random numbers: a replayed graph cannot draw them as eager does (and CSE would merge two draws)",
              [_refusal_case(n, x) for n in RANDOM]),
        Group("shapes, slices, integer index tensors and eval-mode dropout are not values: keep the graph", [
            _refusal_case(n, x) for n in ("arithmetic", "branch on the shape", "x.size(0), x.dim()",
                                          "dropout in eval mode", "indexing with ints and slices",
                                          "integer index tensor x[x[:, 0].argsort()]",
                                          "integer index tensor in a tuple x[:, x[0].argsort()]")]),
    ]


def _refusal_hidden(g: torch.Generator) -> list[Group]:
    """Five programs that break, five that do not and one that draws random numbers, drawn at random, on
    inputs of random sizes."""
    names = []
    for pool, count in ((sorted(BREAKING), 5), (sorted(WHOLE), 5), (sorted(RANDOM), 1)):
        names += [pool[i] for i in torch.randperm(len(pool), generator=g)[:count].tolist()]
    cases = []
    for i in torch.randperm(len(names), generator=g).tolist():
        shape = (1 + draw(g, 5), 2 + draw(g, 4))
        cases.append(_refusal_case(names[i], torch.randn(*shape, generator=g) * (1 + draw(g, 4))))
    return [Group("programs drawn at random, on inputs of random sizes", cases)]


REFUSAL = Exercise(
    id="nb07_graph_capture.refusal",
    reference=_refusal_reference,
    public=_refusal_public,
    hidden=_refusal_hidden,
    hint="the result is (does the call fall back to eager?, its result): refuse the calls that turn a tensor's "
         "values into a Python value (__bool__, item, __int__, __float__, tolist) and those whose result's shape "
         "depends on the values (nonzero, unique, masked_select, indexing with a boolean mask) and those that "
         "draw random numbers (rand_like, randn, bernoulli...); record everything else, shape reads included",
    forbidden=("tensorcraft.compiler.opnames.refusal.library",),
    extra_hints={
        TypeError: "return None to let capture record the call, or a str saying why it must not",
    },
    call=_through_capture,
    truth_once=True,
    shared_truths=lambda: {name: functools.partial(dynamo_breaks, name) for name in (*BREAKING, *WHOLE)},
    parts=("whether the call falls back to eager", "its result"),
)


def check_refusal(refusal, hidden: bool = False) -> None:
    """Check ``refusal(op, args, kwargs) -> str | None`` against Dynamo's graph breaks, run as capture's refusal."""
    REFUSAL.check(refusal, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (CAPTURE, INPUT_GUARD, REFUSAL)}
