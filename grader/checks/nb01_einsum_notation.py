"""Checks for notebook 01 (reading and writing einsum).

Ground truth comes from PyTorch itself: the direct operation each equation stands for
(``A @ B.T``, ``x.permute(...)``, ...), ``torch.einsum`` for output shapes, and
``torch.nn.functional.scaled_dot_product_attention`` for attention.
"""
from __future__ import annotations

from typing import Callable

import torch

import tensorcraft.einstein.api as einstein_api

from .compare import describe, mismatch
from .exercise import Case, Exercise, Group, as_call
from .reach import EQUATION_READERS
from .spy import counting
from .tripwire import ForbiddenCallError

# Captured at import, so that tripwires set while a learner's code runs do not reach our own use.
_torch_einsum = torch.einsum
_tc_einsum = einstein_api.einsum

EINSUM_NAMES = ("torch.einsum", "numpy.einsum", "tensorcraft.einsum", "tensorcraft.einstein.einsum",
                "tensorcraft.einstein.api.einsum", "tensorcraft.einstein.parse_equation",
                "tensorcraft.einstein.parse.parse_equation", "opt_einsum.contract",
                # a path search's report holds the output's letters and each letter's length: the answer
                "opt_einsum.contract_path", "opt_einsum.contract.contract_path", "tensorcraft.contract_path",
                "tensorcraft.einstein.contract_path", "tensorcraft.einstein.path.contract_path",
                # what numpy.einsum calls, looked up at each call: catches numpy.einsum kept under any name
                "numpy._core.einsumfunc.c_einsum")


def _ints(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Small integers in float64: every product and sum is exact, so a comparison has no rounding."""
    return torch.randint(-5, 6, shape, generator=g).to(torch.float64)


def _distinct_sizes(count: int, g: torch.Generator, low: int = 2, high: int = 7) -> list[int]:
    """`count` different sizes: with every axis a different length, a transposed result has another shape."""
    return (torch.randperm(high - low + 1, generator=g)[:count] + low).tolist()


# ---------------------------------------------------------------- exercise 1: write the equations

# name -> (what the statement says, shapes in letters, the direct torch operation)
OPERATIONS: dict[str, tuple[str, tuple[str, ...], Callable[..., torch.Tensor]]] = {
    "matmul_bt": ("A @ B.T for A of shape (i, k) and B of shape (j, k)", ("ik", "jk"),
                  lambda a, b: a @ b.T),
    "row_dots": ("(A * B).sum(dim=1): the dot product of each row of A with the same row of B", ("ij", "ij"),
                 lambda a, b: (a * b).sum(dim=1)),
    "frobenius": ("(A * B).sum(): the sum of all products of matching entries", ("ij", "ij"),
                  lambda a, b: (a * b).sum()),
    "scale_columns": ("A * v: column j of A multiplied by v[j]", ("ij", "j"),
                      lambda a, v: a * v),
    "channels_last": ("x.permute(0, 2, 3, 1): images (b, c, h, w) to (b, h, w, c)", ("bchw",),
                      lambda x: x.permute(0, 2, 3, 1)),
    "batched_outer": ("x[:, :, None] * y[:, None, :]: one outer product per row of x and y", ("bi", "bj"),
                      lambda x, y: x[:, :, None] * y[:, None, :]),
    "batched_trace": ("the trace of each matrix in a batch X of shape (b, i, i)", ("bii",),
                      lambda x: torch.diagonal(x, dim1=1, dim2=2).sum(-1)),
    "sum_of_products": ("(A @ B).sum(dim=0): the sum over b of the matrix products A[b] @ B[b]", ("bij", "bjk"),
                        lambda a, b: (a @ b).sum(dim=0)),
    "attention_output": ("weights @ v: weights (b, h, q, k), values (b, h, k, d) to (b, h, q, d)",
                         ("bhqk", "bhkd"), lambda w, v: w @ v),
    "quadratic_forms": ("((X @ M) * X).sum(dim=1): x^T M x for each row x of X (b, i), M (i, j) square",
                        ("bi", "ij", "bj"),
                        lambda x, a, y: ((x @ a) * y).sum(dim=1)),
}
# quadratic_forms passes X twice (as the first and third operand), so that any letters work


def _operation_case(name: str, g: torch.Generator) -> Case:
    _, letters_per_operand, _ = OPERATIONS[name]
    letters = sorted(set("".join(letters_per_operand)))
    if name == "quadratic_forms":  # x^T A x needs A square: i and j are the same length
        sizes = dict(zip(["b", "i"], _distinct_sizes(2, g)))
        sizes["j"] = sizes["i"]
    else:
        sizes = dict(zip(letters, _distinct_sizes(len(letters), g)))
    operands = [_ints(tuple(sizes[c] for c in term), g) for term in letters_per_operand]
    if name == "quadratic_forms":
        operands[2] = operands[0]
    shapes = ", ".join(str(tuple(t.shape)) for t in operands)
    return Case((name, *operands), f"shapes {shapes}")


def _equations_reference(name: str, *operands: torch.Tensor) -> torch.Tensor:
    return OPERATIONS[name][2](*operands)


NO_ARROW_HINT = ("write every equation with '->' and the result's letters after it: implicit mode chooses "
                 "the output by its own rule (notebook 02), which is right here only by luck")


class NoArrowError(ValueError):
    """An equation without '->': the statement asks for the output written out."""


def run_equation(learner_fn: Callable[[], dict[str, str]], name: str, *operands: torch.Tensor) -> torch.Tensor:
    """Look up the learner's equation for ``name`` and run it through tc.einsum and torch.einsum."""
    table = learner_fn()
    if not isinstance(table, dict):
        raise TypeError(f"equations() must return a dict of equations, got {type(table).__name__}")
    if name not in table:
        raise KeyError(f"equations() has no entry {name!r}; it must have one for each of {sorted(OPERATIONS)}")
    equation = table[name]
    if not isinstance(equation, str):
        raise TypeError(f"equations()[{name!r}] must be an equation string, got {type(equation).__name__}")
    if "->" not in equation:
        raise NoArrowError(f"equations()[{name!r}] is {equation!r}, with no '->': write the output after '->'")
    theirs = _torch_einsum(equation, *operands)
    ours = _tc_einsum(equation, *operands)
    problem = mismatch(theirs, ours)
    if problem:  # not the learner's fault: the two einsums must agree on every valid equation
        raise RuntimeError(f"tc.einsum and torch.einsum disagree on {equation!r} ({problem}); please report this")
    return ours


def _equations_public() -> list[Group]:
    g = torch.Generator().manual_seed(0)
    return [Group(f"{name}: {OPERATIONS[name][0]}", [_operation_case(name, g) for _ in range(2)])
            for name in OPERATIONS]


def _equations_hidden(g: torch.Generator) -> list[Group]:
    return [Group(f"{name}, random shapes", [_operation_case(name, g) for _ in range(3)]) for name in OPERATIONS]


EQUATIONS = Exercise(
    id="nb01_einsum_notation.equations",
    reference=_equations_reference,
    public=_equations_public,
    hidden=_equations_hidden,
    hint="write the letters of each operand's axes in order, then '->' and the letters of the result's "
         "axes in order; a letter left out after '->' is summed over",
    call=run_equation,
    show=lambda name, *operands: f"tc.einsum(equations()[{name!r}], {', '.join(describe(o, 60) for o in operands)})",
    extra_hints={
        NoArrowError: NO_ARROW_HINT,
        KeyError: "return a dict with one entry per operation, under the names of the statement",
        RuntimeError: "einsum rejected the equation: give each operand one letter per axis, in order, and use "
                      "one letter for axes of the same length that must match (see the shapes in the statement)",
        TypeError: "equations() returns a dict from operation names to equation strings such as 'ij,jk->ik'",
    },
)


def check_equations(equations, hidden: bool = False) -> None:
    """Check each equation of ``equations()`` against the direct torch operation, on random shapes."""
    EQUATIONS.check(equations, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: predict the output shape


class NotAShapeError(TypeError):
    """output_shape returned something other than a tuple of ints."""


def run_output_shape(learner_fn: Callable[..., tuple[int, ...]], equation: str, *shapes: tuple[int, ...]) -> tuple:
    """The learner's answer, which must be what the statement asks for: a tuple of Python ints."""
    answer = learner_fn(equation, *shapes)
    if not (isinstance(answer, tuple) and all(type(n) is int for n in answer)):
        raise NotAShapeError(f"output_shape returned {describe(answer)}; it must return a tuple of ints")
    return answer


def _output_shape_reference(equation: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(torch.einsum(equation, *[torch.zeros(s) for s in shapes]).shape)


def _shape_case(equation: str, g: torch.Generator, spaced: bool = False) -> Case:
    """Shapes for an explicit equation: every letter its own random size."""
    inputs = equation.split("->")[0]
    letters = sorted({c for c in inputs if c.isalpha()})
    sizes = dict(zip(letters, _distinct_sizes(len(letters), g, 1, 9) if len(letters) <= 9
                     else torch.randint(1, 6, (len(letters),), generator=g).tolist()))
    shapes = tuple(tuple(sizes[c] for c in term if c.isalpha()) for term in inputs.split(","))
    if spaced:
        equation = " ".join(equation.replace("->", "\0")).replace("\0", "->").replace(" , ", ", ")
    return Case((equation, *shapes), "")


def _output_shape_public() -> list[Group]:
    g = torch.Generator().manual_seed(1)
    return [
        # the first case tells a reversed output (ki) from the order of first appearance (ik, right here); in the
        # second each order a wrong answer could take differs: written kbi, first seen ibk, sorted bik, implicit ik
        Group("the letters after '->' give the order", [_shape_case("ij,jk->ik", g), _shape_case("ibj,bjk->kbi", g)]),
        Group("matrix products and transposes", [_shape_case(e, g) for e in ("ij,jk->ik", "ij->ji", "ij,jk->ki")]),
        Group("outputs in another order than the inputs", [_shape_case(e, g) for e in
                                                           ("bij,bjk->kbi", "abc->cab", "ij,jk->kji")]),
        Group("sums: letters left out of the output", [_shape_case(e, g) for e in ("ij->", "ij->j", "bij,bjk->")]),
        Group("a letter repeated inside one operand", [_shape_case(e, g) for e in ("ii->i", "bii->b", "iij->ji")]),
        Group("three operands; spaces", [_shape_case("ab,bc,cd->da", g), _shape_case("bhqd,bhkd->bhqk", g, spaced=True)]),
        Group("uppercase and lowercase letters are different letters",
              [_shape_case(e, g) for e in ("bB,Bc->cb", "aA->Aa")]),
    ]


def _random_explicit_equation(g: torch.Generator, pool: str = "abcdijkBCX") -> str:
    pool = list(pool)
    chosen = [pool[i] for i in torch.randperm(len(pool), generator=g)[: int(torch.randint(2, 6, (1,), generator=g))]]
    terms = []
    for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
        length = int(torch.randint(1, 4, (1,), generator=g))
        terms.append("".join(chosen[i] for i in torch.randint(0, len(chosen), (length,), generator=g).tolist()))
    used = sorted(set("".join(terms)))
    order = torch.randperm(len(used), generator=g).tolist()
    keep = int(torch.randint(0, len(used) + 1, (1,), generator=g))
    return ",".join(terms) + "->" + "".join(used[i] for i in order[:keep])


def _output_shape_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random explicit equations", [_shape_case(_random_explicit_equation(g), g) for _ in range(8)]),
            Group("random explicit equations with spaces",
                  [_shape_case(_random_explicit_equation(g), g, spaced=True) for _ in range(4)]),
            Group("random explicit equations with b and B, c and C",
                  [_shape_case(_random_explicit_equation(g, pool="bBcC"), g) for _ in range(4)])]


OUTPUT_SHAPE = Exercise(
    id="nb01_einsum_notation.output_shape",
    reference=_output_shape_reference,
    public=_output_shape_public,
    hidden=_output_shape_hidden,
    hint="the result has one axis per letter after '->', in that order, each as long as the axes that "
         "letter names in the inputs",
    forbidden=EINSUM_NAMES,
    answers=EQUATION_READERS,
    forbidden_ops=("einsum",),  # torch.einsum by any route: torch.ops.aten.einsum, a reference kept in a dict
    extra_hints={NotAShapeError: "return a tuple of Python ints, such as (4, 2): tuple(...) of a list, "
                                 "and int(...) of anything that is no int",
                 KeyError: "every letter after '->' names an axis of some input: find its size there "
                           "(and remove spaces before reading the letters)"},
    call=run_output_shape,
    show=as_call("output_shape"),
)


def check_output_shape(output_shape, hidden: bool = False) -> None:
    """Check ``output_shape(equation, *shapes)`` against the shape torch.einsum's result has."""
    OUTPUT_SHAPE.check(output_shape, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: attention with einsum


def run_attention(learner_fn: Callable[..., torch.Tensor], q: torch.Tensor, k: torch.Tensor,
                  v: torch.Tensor) -> torch.Tensor:
    """The learner's attention, which must compute its two products with einsum (torch's or tc's)."""
    tc_calls = []
    run_plan = einstein_api.run_plan

    def counted_run_plan(*args, **kwargs):  # every tc.einsum call runs its plan, however tc.einsum was reached
        tc_calls.append(1)
        return run_plan(*args, **kwargs)

    einstein_api.run_plan = counted_run_plan
    try:
        with counting({"einsum"}) as counts:
            result = learner_fn(q, k, v)
    finally:
        einstein_api.run_plan = run_plan
    used = counts["einsum"] + len(tc_calls)
    if used < 2:
        raise ForbiddenCallError(f"your attention called einsum {used} time{'s' * (used != 1)}; the exercise asks "
                                 "for both products (the scores q·k and the weighted sum of v) as einsum calls")
    return result


def _attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _attention_case(g: torch.Generator, dtype: torch.dtype) -> Case:
    b, h, lq, lk, d, dv = [1 + int(s) for s in torch.randperm(8, generator=g)[:6]]
    q, k, v = (torch.randn(b, h, n, m, generator=g, dtype=torch.float64).to(dtype)
               for n, m in ((lq, d), (lk, d), (lk, dv)))
    return Case((q, k, v), f"b={b} h={h} q={lq} k={lk} d={d}, values of size {dv}, {str(dtype)[6:]}")


def _attention_public() -> list[Group]:
    g = torch.Generator().manual_seed(2)
    return [Group("float64", [_attention_case(g, torch.float64) for _ in range(2)]),
            Group("float32", [_attention_case(g, torch.float32) for _ in range(2)])]


def _attention_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random shapes, float64", [_attention_case(g, torch.float64) for _ in range(4)]),
            Group("random shapes, float32", [_attention_case(g, torch.float32) for _ in range(2)])]


ATTENTION = Exercise(
    id="nb01_einsum_notation.attention",
    reference=_attention_reference,
    public=_attention_public,
    hidden=_attention_hidden,
    # what each step must compute, as the statement says it, never the code of the answer
    hint="compare each step with the statement: the scores are the dot products of every query with every key "
         "of the same batch entry and head, divided by the square root of the feature size; the weights are a "
         "softmax of the scores over the keys; the result weighs the values with them",
    forbidden=("torch.nn.functional.scaled_dot_product_attention", "torch.matmul", "torch.Tensor.matmul",
               "torch.Tensor.__matmul__", "torch.nn.functional.multi_head_attention_forward"),
    # the same by any route (torch.ops.aten.matmul, a reference kept in a dict); tc.einsum's own bmm stays allowed
    forbidden_ops=("scaled_dot_product_attention", "matmul", "__matmul__", "__rmatmul__",
                   "multi_head_attention_forward"),
    numpy_allowed=False,
    call=run_attention,
)


def check_attention(attention, hidden: bool = False) -> None:
    """Check ``attention(q, k, v)`` against torch's scaled_dot_product_attention."""
    ATTENTION.check(attention, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (EQUATIONS, OUTPUT_SHAPE, ATTENTION)}

__all__ = ["EXERCISES", "OPERATIONS", "check_attention", "check_equations", "check_output_shape", "run_attention",
           "run_equation", "run_output_shape"]
