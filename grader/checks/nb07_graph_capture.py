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
import logging
import operator
from typing import Any, Callable, Iterator

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

import tensorcraft
from tensorcraft.compiler.capture import Captured
from tensorcraft.compiler.examples import MLP, Attention, ConvBNReLU, NormSoftmax
from tensorcraft.compiler.ir import Graph
from tensorcraft.compiler.opnames import canonical_name, is_inplace_name
from tensorcraft.compiler.pipeline import compile_graph

from .compare import describe
from .dynamo import without_guard_probe
from .exercise import Case, Exercise, Group
from .seed import draw
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
# A case names its program by a spec (plain data), and both sides build it afresh on the inputs'
# device: a model cannot travel inside a case (the check moves and copies a case's tensors only).

ZOO = {"mlp": MLP, "cnn": ConvBNReLU, "norm_softmax": NormSoftmax, "attention": Attention}

UNARY_FUNCTIONS = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu}
UNARY_METHODS = ("sin", "abs", "neg", "exp", "cos")
SCALAR_OPS = {"mul": operator.mul, "add": operator.add, "rsub": lambda v, c: c - v, "div": operator.truediv}
BINARY = {"add": operator.add, "mul": operator.mul, "sub": operator.sub, "maximum": torch.maximum}
INPLACE = ("relu_", "mul_", "iadd", "sigmoid_")


def _apply(step: tuple, values: list) -> Any:
    """One step of a straight-line program: (kind, name, operand indices, constant)."""
    kind, name, operands, constant = step
    a = values[operands[0]]
    if kind == "function":
        return UNARY_FUNCTIONS[name](a)
    if kind == "method":
        return getattr(a, name)()
    if kind == "scalar":
        return SCALAR_OPS[name](a, constant)
    if kind == "binary":
        return BINARY[name](a, values[operands[1]])
    if kind == "inplace":  # on a fresh intermediate, which capture turns into the functional form
        fresh = a * constant
        if name == "iadd":
            fresh += 1.5
        elif name == "mul_":
            fresh.mul_(0.5)
        else:
            getattr(fresh, name)()
        return fresh
    if kind == "reduce":  # a reduction broadcast back against its input
        return a - getattr(a, name)(-1, keepdim=True)
    if kind == "chunk":   # several results from one call
        first, second = a.chunk(2, dim=-1)
        return torch.cat([second * constant, first], dim=-1)
    if kind == "view":
        return a.reshape(-1).reshape(a.shape).transpose(0, 1).transpose(0, 1)
    raise ValueError(f"unknown step kind {kind!r}")


def _straight_line(steps: tuple, outputs: tuple) -> Callable:
    def program(x):
        values = [x]
        for step in steps:
            values.append(_apply(step, values))
        return values[outputs[0]] if len(outputs) == 1 else tuple(values[i] for i in outputs)
    return program


def build_program(spec: tuple, device: torch.device) -> Callable:
    """("zoo", name, constructor arguments, seed) -> a model in eval mode, float64, on ``device``;
    ("steps", steps, outputs) -> a plain function of x; ("number first", k, steps, outputs) -> a plain
    function of (k, x) that runs the steps on x * k (a Python number before the tensor)."""
    if spec[0] == "zoo":
        _, name, sizes, seed = spec
        torch.manual_seed(seed)
        model = ZOO[name](*sizes)
        with torch.no_grad():
            for module in model.modules():  # non-trivial batch-norm statistics
                if isinstance(module, torch.nn.BatchNorm2d):
                    module.running_mean.uniform_(-0.5, 0.5)
                    module.running_var.uniform_(0.5, 2.0)
        return model.double().eval().to(device)
    if spec[0] == "number first":
        steps = _straight_line(spec[2], spec[3])
        return lambda k, x: steps(x * k)
    return _straight_line(spec[1], spec[2])


def program_args(spec: tuple, x: torch.Tensor) -> tuple:
    """The arguments a program of ``spec`` is called with: x, or (k, x)."""
    return (spec[1], x) if spec[0] == "number first" else (x,)


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


def _capture_reference(spec: tuple, x: torch.Tensor, x2: torch.Tensor) -> tuple:
    program = build_program(spec, x.device)
    ops, params = fx_truth(program, *program_args(spec, x))
    with torch.no_grad():
        return ops, params, program(*program_args(spec, x)), program(*program_args(spec, x2))


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


def _through_compile(learner_capture: Callable, spec: tuple, x: torch.Tensor, x2: torch.Tensor) -> tuple:
    """tensorcraft.compile with the learner's tracer as its capture stage; then the graph it recorded,
    compiled again by the pipeline and replayed on a second input."""
    program = build_program(spec, x.device)
    with torch.no_grad():
        def learners(fn, args=(), kwargs=None, module=None):  # called as the exercise states, whatever the names
            return learner_capture(fn, args, kwargs, module)

        run = run_stage("capture", learners, program, program_args(spec, x), compile_with={"backend": "python"},
                        returns=(Captured,), what="a Captured with a Graph in .graph", then=_with_a_graph)
        first, captured = run.result, run.last.returned
        graph = captured.graph
        ops = [n.op for n in graph.nodes if n.kind == "call"]
        params = sorted(n.target for n in graph.params)
        tensors = _module_tensors(program)
        replay = compile_graph(graph, backend="python")
        second = replay.run(list(program_args(spec, x2)), [tensors[name] for name in replay.param_names])
    return ops, params, first, second


def _capture_case(spec: tuple, shape: tuple, g: torch.Generator, note: str) -> Case:
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    x2 = torch.randn(*shape, generator=g, dtype=torch.float64)
    return Case((spec, x, x2), note)


def _capture_public() -> list[Group]:
    g = torch.Generator().manual_seed(7)
    inplace = (("scalar", "mul", (0,), 2.0), ("inplace", "relu_", (1,), 0.5), ("inplace", "iadd", (2,), 1.0),
               ("binary", "add", (3, 0), None))
    operators = (("method", "sin", (0,), None), ("scalar", "rsub", (1,), 2.0), ("binary", "mul", (2, 0), None),
                 ("function", "tanh", (3,), None), ("scalar", "div", (4,), 3.0))
    several = (("chunk", "chunk", (0,), 2.0), ("reduce", "amax", (1,), None), ("view", "view", (2,), None))
    return [
        Group("functions, methods and operators", [
            _capture_case(("steps", operators, (5,)), (3, 4), g, "x.sin(), 2 - v, v * x, torch.tanh, v / 3"),
        ]),
        Group("a Python number among the arguments: placeholders are numbered over every argument", [
            _capture_case(("number first", 3.0, (("method", "sin", (0,), None), ("binary", "mul", (1, 0), None)), (2,)),
                          (3, 4), g, "f(k, x) called as f(3.0, x): v = x * k; v.sin() * v"),
        ]),
        Group("in-place updates of intermediates (t.relu_(), t += 1)", [
            _capture_case(("steps", inplace, (4,)), (3, 4), g, "t = x * 2; t.relu_(); t += 1.5; t + x"),
        ]),
        Group("calls with several results, reductions, views, two outputs", [
            _capture_case(("steps", several, (3, 1)), (2, 6), g, "chunk, cat, amax, reshape, transpose"),
        ]),
        Group("models: parameters become param nodes", [
            _capture_case(("zoo", "mlp", (16, 32, 8), 0), (4, 16), g, "MLP: Linear, GELU, Linear"),
            _capture_case(("zoo", "cnn", (3, 8, 5), 1), (2, 3, 8, 8), g,
                          "Conv, BatchNorm, ReLU(inplace=True), twice; mean; Linear"),
            _capture_case(("zoo", "attention", (16, 2), 2), (2, 5, 16), g, "attention with einsum and reshapes"),
        ]),
    ]


def random_steps(g: torch.Generator, width: int) -> tuple[tuple, tuple]:
    """A random straight-line program over x of shape (rows, width) (width even): (steps, outputs)."""
    steps: list[tuple] = []
    for _ in range(3 + draw(g, 5)):
        n = len(steps) + 1  # values so far
        a = draw(g, n)
        kind = ("function", "method", "scalar", "binary", "inplace", "reduce", "chunk", "view")[draw(g, 8)]
        if kind == "function":
            steps.append((kind, sorted(UNARY_FUNCTIONS)[draw(g, len(UNARY_FUNCTIONS))], (a,), None))
        elif kind == "method":
            steps.append((kind, UNARY_METHODS[draw(g, len(UNARY_METHODS))], (a,), None))
        elif kind == "scalar":
            steps.append((kind, sorted(SCALAR_OPS)[draw(g, len(SCALAR_OPS))], (a,), (0.5, 2.0, -1.5)[draw(g, 3)]))
        elif kind == "binary":
            steps.append((kind, sorted(BINARY)[draw(g, len(BINARY))], (a, draw(g, n)), None))
        elif kind == "inplace":
            steps.append((kind, INPLACE[draw(g, len(INPLACE))], (a,), (0.5, 2.0)[draw(g, 2)]))
        elif kind == "reduce":
            steps.append((kind, ("sum", "mean", "amax")[draw(g, 3)], (a,), None))
        else:
            steps.append((kind, kind, (a,), 2.0))
    last = len(steps)
    outputs = (last,) if draw(g, 2) else (last, draw(g, last))
    return tuple(steps), outputs


def _random_model(g: torch.Generator) -> tuple[tuple, tuple]:
    name = sorted(ZOO)[draw(g, len(ZOO))]
    seed = draw(g, 1000)
    if name == "mlp":
        d_in, hidden, d_out = 2 + draw(g, 8), 2 + draw(g, 8), 1 + draw(g, 6)
        return ("zoo", name, (d_in, hidden, d_out), seed), (1 + draw(g, 4), d_in)
    if name == "cnn":
        channels, width, classes = 1 + draw(g, 3), 2 + draw(g, 4), 2 + draw(g, 3)
        return ("zoo", name, (channels, width, classes), seed), (1 + draw(g, 2), channels, 3 + draw(g, 4), 4)
    if name == "norm_softmax":
        d = 2 + draw(g, 10)
        return ("zoo", name, (d,), seed), (1 + draw(g, 3), 2 + draw(g, 3), d)
    heads = 1 + draw(g, 3)
    d = heads * (2 + draw(g, 3))
    return ("zoo", name, (d, heads), seed), (1 + draw(g, 2), 2 + draw(g, 4), d)


def _capture_hidden(g: torch.Generator) -> list[Group]:
    programs = []
    for _ in range(6):
        width = 2 * (1 + draw(g, 3))
        steps, outputs = random_steps(g, width)
        programs.append(_capture_case(("steps", steps, outputs), (1 + draw(g, 4), width), g,
                                      f"random program of {len(steps)} steps"))
    steps, outputs = random_steps(g, 2)
    k = (2, 0.5, -1.5)[draw(g, 3)]
    programs.append(_capture_case(("number first", k, steps, outputs), (1 + draw(g, 4), 2), g,
                                  f"f(k, x) called with k = {k}: a random program of {len(steps)} steps on x * k"))
    models = []
    for _ in range(3):
        spec, shape = _random_model(g)
        models.append(_capture_case(spec, shape, g, f"{spec[1]}{spec[2]} on input {list(shape)}"))
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


def _scaled(x, k):
    return x * k + 1


def dynamo_compiles(calls: list[tuple]) -> list[bool]:
    """For each call of ``calls``, did torch.compile (dynamic=False) compile anew?"""
    import torch._dynamo

    torch._dynamo.reset()
    count = [0]

    def counting(graph_module, example_inputs):
        count[0] += 1
        return graph_module.forward

    compiled = torch.compile(_scaled, backend=counting, dynamic=False)
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
    compiled = tensorcraft.compile(_scaled, backend="python")
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

# Programs over one tensor; those that read values into Python break Dynamo's graph, the others do not.
BREAKING = {
    "branch on a value": lambda x: x * 2 if x.sum() > 0 else x - 1,
    "x.max().item()": lambda x: x * x.max().item(),
    "int(x.argmax())": lambda x: x * int(x.argmax()),
    "float(x.mean())": lambda x: x + float(x.mean()),
    "boolean mask x[x > 0]": lambda x: x[x > 0].sum() + x,
    "torch.unique": lambda x: torch.unique(x.round()).sum() + x,
    "x.masked_select(mask)": lambda x: x.masked_select(x > 0).sum() + x,
    "boolean mask in a tuple x[:, x[0] > 0]": lambda x: x[:, x[0] > 0].sum() + x,
    "range(x.argmax())": lambda x: x * len(range(x.argmax())),
}
# Not among them: `while x.abs().max() > 1: x = x / 2`. When the loop body never runs, Dynamo's explain
# counts no graph break (the condition is the last thing the function does), so its answer depends on
# the input's values, and a check could not say what the learner's rule should give.
WHOLE = {
    "arithmetic": lambda x: torch.relu(x) * 3 + x.mean(),
    "branch on the shape": lambda x: x * 2 if x.shape[0] > 2 else x - 1,
    "x.size(0), x.dim()": lambda x: x.reshape(x.size(0), -1).sum(1) * x.dim(),
    "dropout in eval mode": lambda x: F.dropout(x, 0.5, training=False) + 1,
    "indexing with ints and slices": lambda x: x[0] + x[:, 1:].sum(),
    "softmax and matmul": lambda x: x.softmax(-1) @ x.transpose(-1, -2),
    "x.numel() and len(x)": lambda x: x / x.numel() + len(x),
    "torch.where on values": lambda x: torch.where(x > 0, x, -x),
    "integer index tensor x[x[:, 0].argsort()]": lambda x: x[x[:, 0].argsort()] * 2 + x,
    "integer index tensor in a tuple x[:, x[0].argsort()]": lambda x: x[:, x[0].argsort()] - x,
}
# Programs that draw random numbers. Dynamo keeps them in one graph (it replays the generator's state);
# tensorcraft's graphs cannot: a replayed graph would draw as the compiled code does, and CSE would merge
# two draws into one (x + rand_like(x) - rand_like(x) would return x). So capture refuses them: the
# ground truth here is "runs eagerly, with eager's numbers", not Dynamo's answer.
RANDOM = {
    "two draws x + rand_like(x) - rand_like(x)": lambda x: x + torch.rand_like(x) - torch.rand_like(x),
    "torch.randn(x.shape)": lambda x: x * torch.randn(x.shape, dtype=x.dtype, device=x.device),
    "torch.bernoulli(p)": lambda x: torch.bernoulli(torch.sigmoid(x)) * x,
}
PROGRAMS = BREAKING | WHOLE | RANDOM


@contextlib.contextmanager
def _seeded(device: torch.device) -> Iterator[None]:
    """The generator of ``device`` seeded with 0, its state restored afterwards: eager and the compiled
    program draw the same numbers, and the learner's own generator is left as it was."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(0)
        yield


def dynamo_breaks(name: str, x: torch.Tensor) -> bool:
    """Does Dynamo break PROGRAMS[name] into more than one graph on ``x``?"""
    import torch._dynamo

    torch._dynamo.reset()
    with _quiet_dynamo():
        explanation = torch._dynamo.explain(PROGRAMS[name])(x)
    torch._dynamo.reset()
    return explanation.graph_break_count > 0


def _refusal_reference(name: str, x: torch.Tensor) -> tuple[bool, Any]:
    breaks = True if name in RANDOM else dynamo_breaks(name, x)
    with torch.no_grad(), _seeded(x.device):
        return breaks, PROGRAMS[name](x)


def _through_capture(learner_refusal: Callable, name: str, x: torch.Tensor) -> tuple[bool, Any]:
    """tensorcraft.compile with the learner's refusal: (did the call run eagerly?, its result)."""
    with _seeded(x.device):
        run = run_stage("refusal", learner_refusal, PROGRAMS[name], (x,), compile_with={"backend": "python"},
                        grad=False, required=False, returns=(str, type(None)), what="None or a str (the reason)")
    return run.compiled.stats.compiles == 0, run.result


def _refusal_case(name: str, x: torch.Tensor) -> Case:
    return Case((name, x), name)


def _refusal_public() -> list[Group]:
    g = torch.Generator().manual_seed(77)
    x = torch.randn(4, 3, generator=g) * 3
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
    parts=("whether the call falls back to eager", "its result"),
)


def check_refusal(refusal, hidden: bool = False) -> None:
    """Check ``refusal(op, args, kwargs) -> str | None`` against Dynamo's graph breaks, run as capture's refusal."""
    REFUSAL.check(refusal, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (CAPTURE, INPUT_GUARD, REFUSAL)}
