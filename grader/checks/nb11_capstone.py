"""Checks for notebook 11 (the capstone: a transformer block, written, compiled, measured).

Ground truth is eager PyTorch: ``torch.nn.functional.scaled_dot_product_attention`` for the
attention, a block built around ``torch.nn.MultiheadAttention`` (given the learner's weights) for
the block's output and every gradient, and the eager run of each program for the compiled code.
The learner's ``merge_views`` runs inside the compiler's own pipeline (``compile_graph``, with
``tensorcraft.substitute(merge_views=...)`` in force); their ``make_pipeline`` is the list of passes
that pipeline runs. While the learner's code runs, torch's attention modules and functions, and the
library's own ``merge_views``, are tripwires.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

import tensorcraft
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.examples import TransformerBlock as StandIn
from tensorcraft.compiler.ir import Graph
from tensorcraft.compiler.passes import views as library_views
from tensorcraft.compiler.pipeline import compile_graph
from tensorcraft.einstein.lower import contract_pair

from .exercise import Case, Exercise, Group
from .programs import Program
from .programs import draw as draw_program
from .seed import draw, pick
from .spy import Recorder
from .stages import substituted
from .tripwire import ForbiddenCallError

FLOAT = torch.float64  # the cases' dtype: two correct orders of the same sums agree to ~1e-15 here

# torch's own attention: each would write the exercise for the learner
FORBIDDEN_ATTENTION = (
    "torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.multi_head_attention_forward",
    "torch.nn.MultiheadAttention", "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
    "torch.einsum",
)
# the same by any route (torch.ops.aten.einsum, a reference kept in a dict); tc.einsum's own bmm stays allowed
FORBIDDEN_ATTENTION_OPS = ("einsum", "scaled_dot_product_attention", "multi_head_attention_forward")
# the library's stand-in block, which the notebook runs where the learner's is not written yet
FORBIDDEN_BLOCK = FORBIDDEN_ATTENTION + ("tensorcraft.compiler.examples.TransformerBlock",)
# the stage's `.library` first: once the stage itself is a tripwire, its attribute is out of reach
VIEWS_STAGE = library_views.merge_views   # what the checks run: it calls the learner's substitute
FORBIDDEN_VIEWS = ("tensorcraft.compiler.passes.views.merge_views.library",
                   "tensorcraft.compiler.passes.views.merge_views")
BLOCK_PARAMETERS = {  # name -> shape, for d and heads
    "ln1.weight": lambda d: (d,), "ln1.bias": lambda d: (d,),
    "qkv.weight": lambda d: (3 * d, d), "qkv.bias": lambda d: (3 * d,),
    "proj.weight": lambda d: (d, d), "proj.bias": lambda d: (d,),
    "ln2.weight": lambda d: (d,), "ln2.bias": lambda d: (d,),
    "fc1.weight": lambda d: (4 * d, d), "fc1.bias": lambda d: (4 * d,),
    "fc2.weight": lambda d: (d, 4 * d), "fc2.bias": lambda d: (d,),
}


class NotWrittenWithEinsum(AssertionError):
    """The learner's attention computed its products without tc.einsum."""


class PassMissing(AssertionError):
    """The learner's pipeline never ran the pass it was given."""


# ---------------------------------------------------------------- exercise 1: attention


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, causal: bool) -> torch.Tensor:
    """torch's fused attention, with the heads split as (h e): head i owns features i*e ... i*e + e - 1."""
    b, tq, d = q.shape
    split = lambda z: z.reshape(z.shape[0], z.shape[1], heads, d // heads).transpose(1, 2)  # noqa: E731
    out = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=causal)
    return out.transpose(1, 2).reshape(b, tq, d)


def _attention_with_tc_einsum(learner_attention: Callable, q, k, v, heads: int, causal: bool):
    """Run the learner's attention and make sure its products went through ``tc.einsum`` (whose
    contractions all pass through the stage ``contract_pair``)."""
    with substituted("contract_pair", contract_pair.library) as contractions:
        out = learner_attention(q, k, v, heads, causal)
    if not contractions.calls:
        raise NotWrittenWithEinsum("your attention computed no product with tc.einsum")
    return out


def _qkv(g: torch.Generator, b: int, tq: int, tk: int, d: int, dtype: torch.dtype = FLOAT) -> tuple:
    return (torch.randn(b, tq, d, generator=g).to(dtype), torch.randn(b, tk, d, generator=g).to(dtype),
            torch.randn(b, tk, d, generator=g).to(dtype))


def _attention_case(g: torch.Generator, b: int, tq: int, tk: int, d: int, heads: int, causal: bool,
                    dtype: torch.dtype = FLOAT) -> Case:
    note = (f"q {(b, tq, d)}, k and v {(b, tk, d)}, heads={heads}, causal={causal}, "
            f"{str(dtype).removeprefix('torch.')}")
    return Case((*_qkv(g, b, tq, tk, d, dtype), heads, causal), note)


def _attention_public() -> list[Group]:
    g = torch.Generator().manual_seed(11)
    return [
        Group("one head, no mask", [_attention_case(g, 2, 5, 5, 4, 1, False),
                                    _attention_case(g, 1, 3, 3, 8, 1, False)]),
        Group("several heads: the features split as (h e)", [_attention_case(g, 2, 5, 5, 12, 3, False),
                                                             _attention_case(g, 1, 4, 4, 8, 4, False)]),
        Group("causal: a query sees only keys at or before it", [_attention_case(g, 2, 6, 6, 8, 2, True),
                                                                 _attention_case(g, 1, 1, 1, 4, 2, True)]),
        Group("queries and keys of different lengths", [_attention_case(g, 2, 3, 7, 8, 2, False)]),
        Group("float32", [_attention_case(g, 2, 5, 5, 8, 2, True, torch.float32)]),
    ]


def _attention_meta() -> list[Group]:
    g = torch.Generator().manual_seed(111)
    return [Group("on the meta device: the mask on the inputs' device (shapes only, no GPU needed)",
                  [_attention_case(g, 2, 4, 4, 8, 2, True)])]


def _attention_hidden(g: torch.Generator) -> list[Group]:
    cases = []
    for _ in range(10):
        heads, e = draw(g, 1, 5), draw(g, 1, 6)
        tq = draw(g, 1, 8)
        causal = bool(draw(g, 0, 2))
        tk = tq if causal else draw(g, 1, 8)
        cases.append(_attention_case(g, draw(g, 1, 4), tq, tk, heads * e, heads, causal))
    return [Group("random shapes, heads and masks", cases)]


ATTENTION = Exercise(
    id="nb11_capstone.attention",
    reference=reference_attention,
    public=_attention_public,
    hidden=_attention_hidden,
    hint="split each of q, k, v with 'b t (h e) -> b h t e'; scores 'bhqe,bhke->bhqk' times e ** -0.5 (e is the "
         "size of one head); with causal=True fill the scores of keys after the query (key index > query index) "
         "with -inf; softmax over the keys (the last axis); 'bhqk,bhke->bhqe'; then 'b h t e -> b t (h e)'",
    forbidden=FORBIDDEN_ATTENTION,
    forbidden_ops=FORBIDDEN_ATTENTION_OPS,
    numpy_allowed=False,
    extra_hints={
        NotWrittenWithEinsum: "write the two products (scores, and the weighted sum of values) with tc.einsum, "
                              "the einsum you rebuilt in notebooks 01-04: torch.matmul or @ compute them, but this "
                              "exercise is about writing them as equations",
        RuntimeError: "torch refused an operation (its message says which): check the equations' letters (q and k "
                      "share b, h and e; the scores are bhqk), the mask's shape (queries x keys, broadcast over b and "
                      "h), and that a tensor you create is on the scores' device (device=scores.device)",
    },
    call=_attention_with_tc_einsum,
    on_meta=_attention_meta,
    truth_once=True,           # each public case's reference: computed once per grading worker (checks/truths.py)
)


def check_attention(attention, hidden: bool = False) -> None:
    """Check ``attention(q, k, v, heads, causal)`` against torch's scaled_dot_product_attention."""
    ATTENTION.check(attention, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: the block


class TorchBlock(nn.Module):
    """The block of the notebook written with torch's own nn.MultiheadAttention: the ground truth.
    Its ``qkv``/``proj`` weights live in the attention module as ``in_proj_*`` and ``out_proj``."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attention = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)  # True: may not attend
        h = self.ln1(x)
        x = x + self.attention(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def parameter_named(self, name: str) -> nn.Parameter:
        """The parameter playing the role of the learner's ``name`` (``qkv.weight``, ...)."""
        renamed = {"qkv.weight": "attention.in_proj_weight", "qkv.bias": "attention.in_proj_bias",
                   "proj.weight": "attention.out_proj.weight", "proj.bias": "attention.out_proj.bias"}
        return self.get_parameter(renamed.get(name, name))


def _weights(name: str, shape: tuple[int, ...], seed: int, dtype: torch.dtype, device) -> torch.Tensor:
    """A parameter's value, the same for the learner's block and the reference: layer-norm scales
    near 1, biases small, linear weights scaled by 1/sqrt(fan in)."""
    g = torch.Generator().manual_seed(seed * 1000 + sorted(BLOCK_PARAMETERS).index(name))
    value = torch.randn(shape, generator=g, dtype=torch.float64)
    if name.startswith("ln") and name.endswith("weight"):
        value = 1 + 0.2 * value
    elif name.endswith("bias"):
        value = 0.1 * value
    else:
        value = value / math.sqrt(shape[1])
    return value.to(dtype=dtype, device=device)


def _forward_backward(model: nn.Module, parameter: Callable[[str], torch.Tensor], x: torch.Tensor, seed: int) -> dict:
    """Set every parameter, run forward and backward (a seeded upstream gradient); the output and the
    gradients of the input and of every parameter, by the learner's names."""
    with torch.no_grad():
        for name, shape in BLOCK_PARAMETERS.items():
            parameter(name).copy_(_weights(name, shape(x.shape[-1]), seed, x.dtype, x.device))
    x = x.detach().clone().requires_grad_(True)
    out = model(x)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward must return a tensor, got {type(out).__name__}")
    g = torch.Generator().manual_seed(seed)
    upstream = torch.randn(out.shape, generator=g, dtype=torch.float64).to(dtype=out.dtype, device=out.device)
    out.backward(upstream)
    grads = {f"gradient of {name}": parameter(name).grad for name in BLOCK_PARAMETERS}
    return {"output": out.detach(), "gradient of the input": x.grad, **grads}


def reference_block(d: int, heads: int, x: torch.Tensor, seed: int) -> dict:
    model = TorchBlock(d, heads).to(dtype=x.dtype, device=x.device)
    return _forward_backward(model, model.parameter_named, x, seed)


def _run_learners_block(Block, d: int, heads: int, x: torch.Tensor, seed: int) -> dict:
    if isinstance(Block, type) and issubclass(Block, StandIn):
        raise ForbiddenCallError("your Block is built on the library's stand-in (tensorcraft.compiler.examples."
                                 "TransformerBlock), which the exercise 'block' asks you to do without")
    model = Block(d, heads)
    if not isinstance(model, nn.Module):
        raise TypeError(f"Block(d, heads) must make a torch.nn.Module, got {type(model).__name__}")
    theirs = {name: tuple(p.shape) for name, p in model.named_parameters()}
    wanted = {name: shape(d) for name, shape in BLOCK_PARAMETERS.items()}
    if theirs != wanted:
        raise ValueError(f"Block({d}, {heads}) has the parameters {theirs}; the statement asks for exactly {wanted}")
    model = model.to(dtype=x.dtype, device=x.device)
    return _forward_backward(model, model.get_parameter, x, seed)


def _block_case(g: torch.Generator, d: int, heads: int, b: int, t: int) -> Case:
    seed = draw(g, 0, 10001)
    return Case((d, heads, torch.randn(b, t, d, generator=g, dtype=FLOAT), seed),
                f"Block({d}, {heads}) on x of shape {(b, t, d)}, forward and backward")


def _block_public() -> list[Group]:
    g = torch.Generator().manual_seed(111)
    return [
        Group("one head: output and every gradient", [_block_case(g, 4, 1, 2, 3)]),
        Group("several heads, causal attention", [_block_case(g, 8, 2, 2, 5), _block_case(g, 12, 4, 1, 6)]),
        Group("a sequence of one token", [_block_case(g, 8, 2, 3, 1)]),
    ]


def _random_block_sizes(g: torch.Generator, shortest: int) -> tuple[int, int, int, int]:
    """(d, heads, batch, tokens): 1-3 heads of 1-4 features, 1-3 sequences of ``shortest``-6 tokens."""
    heads = draw(g, 1, 4)
    return heads * draw(g, 1, 5), heads, draw(g, 1, 4), draw(g, shortest, 7)


def _block_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random sizes", [_block_case(g, *_random_block_sizes(g, 1)) for _ in range(4)])]


BLOCK = Exercise(
    id="nb11_capstone.block",
    reference=reference_block,
    public=_block_public,
    hidden=_block_hidden,
    hint="pre-norm, twice: x = x + proj(attention(q, k, v, heads, causal=True)) with q, k, v = "
         "qkv(ln1(x)).chunk(3, dim=-1) in that order; then x = x + fc2(gelu(fc1(ln2(x)))) with the exact "
         "(erf) GELU, F.gelu's default. check_attention must pass first: the block calls your attention",
    forbidden=FORBIDDEN_BLOCK,
    forbidden_ops=FORBIDDEN_ATTENTION_OPS,
    numpy_allowed=False,
    extra_hints={
        ValueError: "Block(d, heads) must hold exactly ln1, qkv, proj, ln2, fc1, fc2: nn.LayerNorm(d), "
                    "nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)",
        NotImplementedError: "your block calls your attention, which is not written yet: write attention first",
    },
    call=_run_learners_block,
    truth_once=True,           # each public case's reference: computed once per grading worker (checks/truths.py)
)


def check_block(Block, hidden: bool = False) -> None:
    """Check the class ``Block(d, heads)``: output and gradients equal a block built on nn.MultiheadAttention."""
    BLOCK.check(Block, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: merge_views


def view_chains(graph: Graph) -> int:
    """How many reshapes/views read a reshape/view, and permutes read a permute: what merge_views must end."""
    families = ({"reshape", "view"}, {"permute"})
    return sum(1 for n in graph.nodes if n.kind == "call" and n.args and isinstance(n.args[0], type(n))
               and n.args[0].kind == "call" and any(n.op in f and n.args[0].op in f for f in families))


# The programs exercise 3 compiles (programs.Program: source text, run eagerly as the ground truth).
EINSUM_BLOCK = Program((
    # the notebook's block as a function of its weights, written with tc.rearrange and tc.einsum (no layer-norm affine)
    "d, t = x.shape[-1], x.shape[1]",
    "q, k, v = F.linear(F.layer_norm(x, (d,)), w_qkv, b_qkv).chunk(3, dim=-1)",
    'q, k, v = (tensorcraft.rearrange(z, "b t (h e) -> b h t e", h=heads) for z in (q, k, v))',
    'scores = tensorcraft.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5',
    "causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)",
    'weights = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)',
    'mixed = tensorcraft.rearrange(tensorcraft.einsum("bhqk,bhke->bhqe", weights, v), "b h t e -> b t (h e)")',
    "x = x + F.linear(mixed, w_proj, b_proj)",
    "return x + F.linear(F.gelu(F.linear(F.layer_norm(x, (d,)), w_fc1, b_fc1)), w_fc2, b_fc2)",
), ("x", "w_qkv", "b_qkv", "w_proj", "b_proj", "w_fc1", "b_fc1", "w_fc2", "b_fc2", "heads=2"), name="einsum_block")
einsum_block = EINSUM_BLOCK.fn
VIEW_PROGRAMS = (
    Program(("return x.reshape(6, 4).reshape(4, 6).view(24) * 2, x.view(6, 4).reshape(2, 12) + 1",),
            name="reshape_chains"),
    Program(("y = x.permute(2, 0, 1).permute((0, 2, 1))",         # *dims, then a tuple
             "z = torch.permute(x, (1, 2, 0)).permute(-1, 0, -2)",  # torch.permute, then negative dims
             "return y + 1, z * 2"), name="permutes_three_ways"),
    Program(("return x.permute(1, 0, 3, 2).permute(3, 2, 0, 1).permute(0, 3, 2, 1) - 1",),
            name="permutes_that_do_not_commute"),
    Program(("inner = x.reshape(6, 4)",
             "return inner.reshape(24) * 3, inner.sum(dim=0), inner.permute(1, 0).permute(1, 0) + inner"),
            name="inner_view_read_twice"),
    # A kernel's output, viewed twice and read after the next kernel: a merged view that does not say it looks
    # into the kernel's buffer lets the memory plan hand that buffer to the next kernel.
    Program(("a = x * 2 + 1", "v = a.reshape(6, 4).reshape(24)", "b = (x * 3 - 1).reshape(24)",
             "return (v * b + 1).sum()"), name="view_of_a_fused_value"),
)
PROGRAMS = {program.name: program for program in (EINSUM_BLOCK, *VIEW_PROGRAMS)}


def _eager_program(program: Program, inputs: tuple, passes: tuple, gradients: bool) -> dict:
    """Ground truth: the program run eagerly; what the pass must reach: no view chain left, and the
    graph it was given left as it was."""
    outputs, grads = _outputs_and_gradients(program.fn, inputs, gradients)
    return {"outputs": outputs, "gradients of the inputs": grads, "view-of-view chains left after your pass": 0,
            "the graph given to your pass is unchanged": True}


def _outputs_and_gradients(run: Callable, inputs: tuple, gradients: bool) -> tuple:
    inputs = tuple(t.detach().clone().requires_grad_(gradients) for t in inputs)
    with torch.set_grad_enabled(gradients):
        outputs = run(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    if not gradients:
        return tuple(o.detach() for o in outputs), ()
    total = sum((o * torch.linspace(-1, 1, o.numel(), dtype=o.dtype, device=o.device).reshape(o.shape)).sum()
                for o in outputs)
    return tuple(o.detach() for o in outputs), torch.autograd.grad(total, inputs)


def _through_the_pipeline(learner_pass: Callable, program: Program, inputs: tuple, passes: tuple,
                          gradients: bool) -> dict:
    """Capture the program, compile it with ``passes`` (the library's pipeline after capture) while
    ``merge_views`` is the learner's, run the generated code; report what the pass left."""
    graph = capture(program.fn, inputs).graph
    with substituted("merge_views", learner_pass, returns=(Graph,), what="a Graph", note=str) as spy:
        compiled = compile_graph(graph, backend="python", passes=[VIEWS_STAGE if p == "views" else p for p in passes],
                                 need_grad=gradients)
    run = lambda *values: compiled.run(list(values), [], need_grad=gradients)  # noqa: E731
    outputs, grads = _outputs_and_gradients(run, inputs, gradients)
    return {"outputs": outputs, "gradients of the inputs": grads,
            "view-of-view chains left after your pass": view_chains(spy.last.returned) if spy.calls else None,
            "the graph given to your pass is unchanged": not any(c.changed_its_arguments for c in spy.calls)}


def _block_weights(g: torch.Generator, d: int) -> tuple:
    shapes = [(3 * d, d), (3 * d,), (d, d), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return tuple(torch.randn(s, generator=g, dtype=FLOAT) / (math.sqrt(s[1]) if len(s) == 2 else 10) for s in shapes)


def _program_case(name: str, inputs: tuple, passes=("views", "dce"), gradients: bool = False) -> Case:
    note = f"{name}, passes {list(passes)}" + (", forward and backward" if gradients else "")
    return Case((PROGRAMS[name], inputs, tuple(passes), gradients), note)


def _views_public() -> list[Group]:
    g = torch.Generator().manual_seed(1111)
    x = torch.randn(2, 3, 4, generator=g, dtype=FLOAT)
    return [
        Group("chains of reshapes and views", [_program_case("reshape_chains", (x,))]),
        Group("permutes, spelled three ways", [_program_case("permutes_three_ways", (x,)),
                                               _program_case("permutes_that_do_not_commute",
                                                             (torch.randn(2, 3, 4, 5, generator=g, dtype=FLOAT),))]),
        Group("an inner view that other nodes read too", [_program_case("inner_view_read_twice", (x,))]),
        Group("a view of a fused kernel's output (the memory plan reads aliases)",
              [_program_case("view_of_a_fused_value", (x.float(),), ("views", "cse", "dce", "fusion"))]),
        Group("the block written with tc.rearrange and tc.einsum, compiled", [
            _program_case("einsum_block", (torch.randn(2, 5, 8, generator=g, dtype=FLOAT), *_block_weights(g, 8)),
                          ("views", "cse", "dce"), gradients=True)]),
    ]


FACTORISATIONS = ((24,), (6, 4), (4, 6), (2, 12), (3, 2, 4), (2, 2, 6), (-1, 8))  # of a (2, 3, 4) tensor


def random_view_program(g: torch.Generator) -> Program:
    """Steps on a (2, 3, 4) tensor, one after the other (programs.draw): reshapes and views to random
    factorisations, permutes (in three spellings, some dims negative), and products whose results are all
    returned. A view of a permuted value (or of a reshape of one) reads ``.contiguous()`` first, as eager
    PyTorch requires."""
    state = {"rank": 3, "contiguous": True, "scaled": []}

    def reshaped(kind: str) -> Callable:
        def step(g: torch.Generator, a: str, _: list[str]) -> str:
            shape = pick(g, FACTORISATIONS)
            source = a if state["contiguous"] or kind == "reshape" else f"{a}.contiguous()"
            # a view reads a contiguous value and is one; a reshape of a strided value can be a strided
            # view of it ((2, 3, 4).permute(2, 0, 1).reshape(4, 6) has strides (1, 4)), so count it as strided
            state.update(rank=len(shape), contiguous=state["contiguous"] or kind == "view")
            return f"{source}.{kind}({', '.join(map(str, shape))})"
        return step

    def permuted(g: torch.Generator, a: str, _: list[str]) -> str:
        rank = state["rank"]
        dims = [d - rank if i % 2 else d for i, d in enumerate(d for d in torch.randperm(4, generator=g).tolist()
                                                             if d < rank)]
        state["contiguous"] = state["contiguous"] and [d % rank for d in dims] == list(range(rank))
        listed = ", ".join(map(str, dims))
        return pick(g, (f"{a}.permute({listed})", f"{a}.permute({tuple(dims)})", f"torch.permute({a}, [{listed}])"))

    def scaled(g: torch.Generator, a: str, values: list[str]) -> str:
        state["scaled"].append(f"v{len(values) - 1}")  # the name this step's value gets
        return f"{a} * {0.5 + draw(g, 0, 4) / 2}"

    vocabulary = (reshaped("reshape"), reshaped("view"), permuted, permuted, scaled)
    return draw_program(g, vocabulary, draw(g, 2, 8), reach=1, returns=lambda g, values: ", ".join(
        [*state["scaled"], values[-1]]), shapes=((2, 3, 4),))


def _views_hidden(g: torch.Generator) -> list[Group]:
    cases = []
    for _ in range(12):
        program = random_view_program(g)
        passes = ("views", "dce") if draw(g, 0, 2) else ("views", "cse", "dce", "fusion")
        cases.append(Case((program, program.inputs(g), passes, False),
                          f"a random chain of {len(program.body) - 1} views and products, passes {list(passes)}"))
    d = 4 * draw(g, 1, 4)
    return [
        Group("random chains of views", cases),
        Group("the block at random sizes, forward and backward", [
            _program_case("einsum_block", (torch.randn(draw(g, 1, 4), draw(g, 2, 7), d, generator=g, dtype=FLOAT),
                                           *_block_weights(g, d)), ("views", "cse", "dce"), gradients=True)]),
        Group("a view of a fused kernel's output", [
            _program_case("view_of_a_fused_value", (torch.randn(2, 3, 4, generator=g),), ("views", "cse", "dce", "fusion"))]),
    ]


MERGE_VIEWS = Exercise(
    id="nb11_capstone.merge_views",
    reference=_eager_program,
    public=_views_public,
    hidden=_views_hidden,
    hint="work on graph.copy(); for every reshape/view whose input is a reshape/view, make one reshape of the "
         "inner view's input to the outer node's shape; for a permute of a permute, one permute whose order is "
         "[inner[i] for i in outer]; create the node with aliases= the inner view's input and put it in with "
         "graph.replace(node, [new])",
    forbidden=FORBIDDEN_VIEWS,
    given=("tensorcraft.compiler.passes.views.permutation_of",),
    extra_hints={
        ValueError: "the graph refused a change (its message names the node): create new nodes with graph.create, "
                    "put them in with graph.replace(old, [new]), and remove nothing that another node still reads",
        RuntimeError: "torch refused a shape while running the compiled graph: a merged reshape takes the outer "
                      "node's shape (node.shape), a merged permute the composed order",
    },
    call=_through_the_pipeline,
    truth_once=True,           # each public case's reference: computed once per grading worker (checks/truths.py)
)


def check_merge_views(merge_views, hidden: bool = False) -> None:
    """Check ``merge_views(graph) -> Graph`` inside the compiler's pipeline, against eager PyTorch."""
    MERGE_VIEWS.check(merge_views, hidden=hidden)


# ---------------------------------------------------------------- exercise 4: make_pipeline

REFERENCE_PIPELINE = (library_views.merge_views.library, "constant_folding", "decompose", "cse", "dce", "fusion")
VIEW_PASS = "your view pass"
# What the statement requires: each of these once, each changing the graph where it runs. "cse" may be
# listed anywhere: this block has no repeated computation, so it finds nothing wherever it runs.
REQUIRED = (VIEW_PASS, "constant_folding", "decompose", "dce", "fusion")
OPTIONAL = ("cse",)


def _shape_of_graph(graph: Graph) -> list:
    """The nodes as (kind, op, positions of their inputs, shape): equal before and after a pass that did nothing."""
    index = {n: i for i, n in enumerate(graph.nodes)}
    return [(n.kind, n.op, tuple(index.get(i, -1) for i in n.inputs), None if n.shape is None else tuple(n.shape))
            for n in graph.nodes]


def _watched(passes: list, view_pass: Callable | None) -> tuple[list, list[str], list[str]]:
    """``passes`` with each wrapped to record whether it changed the graph; (wrapped, the names in the list,
    the names of those that changed nothing where they ran)."""
    from tensorcraft.compiler.passes import resolve_passes
    names = [VIEW_PASS if p is view_pass else p if isinstance(p, str) else getattr(p, "__name__", repr(p))
             for p in passes]
    idle: list[str] = []
    wrapped = []
    for place, (name, fn) in enumerate(zip(names, resolve_passes(passes)), start=1):
        def watched(graph: Graph, fn=fn, name=name, place=place) -> Graph:
            out = fn(graph)
            if name not in OPTIONAL and _shape_of_graph(out) == _shape_of_graph(graph):
                idle.append(f"{name} (pass {place} of {len(names)})")
            return out
        wrapped.append(watched)
    return wrapped, names, idle


def _list_facts(names: list[str], idle: list[str]) -> dict:
    return {"required passes in your list, each once": sorted(n for n in names if n in REQUIRED),
            "passes that changed nothing where they ran": sorted(idle)}


def _constant_calls(graph: Graph) -> int:
    """Calls whose value reads no input and no parameter: recomputed at every call unless folded."""
    depends: dict = {}
    for node in graph.nodes:
        depends[node] = node.kind in ("placeholder", "param") or any(depends[i] for i in node.inputs)
    return sum(1 for n in graph.nodes if n.kind == "call" and not depends[n])


def _unread(graph: Graph) -> int:
    """Calls, constants and parameters no node reads: what DCE, run after the passes that leave them, removes."""
    users = graph.users()
    return sum(1 for n in graph.nodes if n.kind in ("call", "constant", "param") and not users[n])


def _pipeline_facts(compiled, x: torch.Tensor, ran: Callable[[], bool]) -> dict:
    """Compile (on the first call, lazily), run the generated code, and read the optimized graph."""
    with torch.no_grad():
        compiled(x)                       # the first call captures and compiles
        outputs = compiled(x)             # this one runs the generated code
    graph = compiled.compiled.optimized
    return {"output": outputs, "your view pass ran": ran(), "view-of-view chains left": view_chains(graph),
            "calls that read no input, recomputed at every call": _constant_calls(graph),
            "softmax and layer_norm calls left whole": graph.count(op="softmax") + graph.count(op="layer_norm"),
            "nodes that nothing reads": _unread(graph),
            "fused kernels": graph.count(kind="kernel")}


def _stand_in(d: int, heads: int, x: torch.Tensor, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return StandIn(d, heads).to(dtype=x.dtype, device=x.device).eval()


def reference_pipeline(d: int, heads: int, x: torch.Tensor, seed: int) -> dict:
    """Eager's output; what the passes reach when each finds what it works on (the library's order)."""
    model = _stand_in(d, heads, x, seed)
    view_pass = REFERENCE_PIPELINE[0]
    wrapped, names, idle = _watched(list(REFERENCE_PIPELINE), view_pass)
    facts = _pipeline_facts(tensorcraft.compile(model, passes=wrapped, backend="python"), x, lambda: True)
    with torch.no_grad():
        facts["output"] = model(x)
    return facts | _list_facts(names, idle)


def _compile_with_the_learners_pipeline(make_pipeline: Callable, d: int, heads: int, x: torch.Tensor, seed: int) -> dict:
    """Compile the library's block with the passes ``make_pipeline(spy)`` lists; the spy is a correct
    view pass that records that it ran."""
    view_pass = Recorder(library_views.merge_views.library, VIEW_PASS)
    passes = make_pipeline(view_pass)
    if not isinstance(passes, (list, tuple)):
        raise TypeError(f"make_pipeline must return a list of passes, got {type(passes).__name__}")
    wrapped, names, idle = _watched(list(passes), view_pass)
    compiled = tensorcraft.compile(_stand_in(d, heads, x, seed), passes=wrapped, backend="python")
    return _pipeline_facts(compiled, x, lambda: bool(view_pass.calls)) | _list_facts(names, idle)


def _pipeline_case(g: torch.Generator, d: int, heads: int, b: int, t: int) -> Case:
    return Case((d, heads, torch.randn(b, t, d, generator=g, dtype=FLOAT), draw(g, 0, 10001)),
                f"the block ({d=}, {heads=}) on x of shape {(b, t, d)}, inference")


def _pipeline_public() -> list[Group]:
    g = torch.Generator().manual_seed(1112)
    return [Group("the block compiled with your pipeline", [_pipeline_case(g, 8, 2, 2, 5)])]


def _pipeline_hidden(g: torch.Generator) -> list[Group]:
    return [Group("the block at random sizes", [_pipeline_case(g, *_random_block_sizes(g, 2)) for _ in range(2)])]


MAKE_PIPELINE = Exercise(
    id="nb11_capstone.make_pipeline",
    reference=reference_pipeline,
    public=_pipeline_public,
    hidden=_pipeline_hidden,
    hint="list the view pass you are given (the function, not the name 'views'), 'constant_folding', "
         "'decompose', 'dce' and 'fusion', each once, in an order in which each finds its work: a pass sees only "
         "what the passes before it left ('cse' may be added anywhere)",
    extra_hints={ValueError: "a name in your list is not a pass: the names are 'conv_bn', 'constant_folding', "
                             "'decompose', 'views', 'cse', 'dce', 'fusion'"},
    call=_compile_with_the_learners_pipeline,
    truth_once=True,           # each public case's reference: computed once per grading worker (checks/truths.py)
)


def check_make_pipeline(make_pipeline, hidden: bool = False) -> None:
    """Check ``make_pipeline(view_pass) -> list``: the block compiled with it equals eager, and every pass did its part."""
    MAKE_PIPELINE.check(make_pipeline, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (ATTENTION, BLOCK, MERGE_VIEWS, MAKE_PIPELINE)}

__all__ = ["check_attention", "check_block", "check_merge_views", "check_make_pipeline", "EXERCISES", "view_chains",
           "reference_attention", "TorchBlock", "einsum_block"]
