"""Checks for notebook 03 (einsum as loops): the definition, a loop-code generator, and the
number of iterations the loops run.

Each learner function is a stage of ``tensorcraft.einstein.loops`` and is run through the library's
pipeline (``einsum_by_definition`` / ``bind_call``) inside ``tensorcraft.substitute``. Ground truth
is torch.einsum: the result itself for the first two exercises, and for the count, torch.einsum
summing a product of ones over every label (which counts the points of the index space).
"""
from __future__ import annotations

import ast
import math
from typing import Any, Callable

import torch

from tensorcraft.einstein import loops
from tensorcraft.stages import substitute

from .exercise import Case, Exercise, Group, as_call, on_meta
from .reach import EQUATION_READERS
from .seed import pick

# What a learner would reach for instead of loops. (Python's own sum() stays allowed.)
NOT_LOOPS = (
    "torch.einsum", "numpy.einsum", "opt_einsum.contract", "einops.einsum",
    "tensorcraft.einsum", "tensorcraft.einstein.api.einsum",
    "torch.tensordot", "torch.matmul", "torch.Tensor.matmul", "torch.Tensor.__matmul__",
    "torch.bmm", "torch.mm", "torch.mv", "torch.dot", "torch.outer",
    "torch.sum", "torch.Tensor.sum", "torch.diagonal", "torch.Tensor.diagonal", "torch.diag",
    "numpy._core.einsumfunc.c_einsum",  # what numpy.einsum calls: numpy.einsum kept under any name
)
# The same operations by any route (torch.ops.aten.einsum, a reference kept in a dict, a method).
NOT_LOOP_OPS = ("einsum", "tensordot", "matmul", "__matmul__", "__rmatmul__", "bmm", "mm", "mv", "dot",
                "outer", "sum", "diagonal", "diag")

# ---------------------------------------------------------------- cases


def _operand(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(-5, 6, shape, generator=g, dtype=dtype)


def _case(equation: str, shapes: list[tuple[int, ...]], dtype: torch.dtype, g: torch.Generator, note: str) -> Case:
    return Case((equation, *[_operand(s, dtype, g) for s in shapes]), note or equation)


def random_equation(g: torch.Generator, max_points: int = 48) -> tuple[str, list[tuple[int, ...]]]:
    """An explicit equation of letters with shapes that fit: 1-3 operands, repeated labels
    (diagonals), size-1 dimensions that broadcast, and the output in a random order."""
    while True:
        pool = [c for c in "ijkbXn" if float(torch.rand(1, generator=g)) < 0.6][:4] or ["i", "j"]
        size = {c: pick(g, [1, 2, 3, 4]) for c in pool}
        terms, shapes = [], []
        for _ in range(pick(g, [1, 2, 2, 2, 3])):
            letters = [pick(g, pool) for _ in range(pick(g, [0, 1, 2, 2, 3]))]
            broadcast = {c: float(torch.rand(1, generator=g)) < 0.2 for c in letters}
            terms.append("".join(letters))
            shapes.append(tuple(1 if broadcast[c] else size[c] for c in letters))
        used = sorted({c for t in terms for c in t})
        order = torch.randperm(len(used), generator=g).tolist()
        output = "".join(used[k] for k in order[: pick(g, list(range(len(used) + 1)))])
        points = math.prod(max((d for t, s in zip(terms, shapes) for c2, d in zip(t, s) if c2 == c), default=1)
                           for c in used)
        if points <= max_points:
            return ",".join(terms) + "->" + output, shapes


def empty_dimension_case(g: torch.Generator) -> tuple[str, list[tuple[int, ...]]]:
    """Two operands sharing a label that has size 0 in one and 1 in the other: torch gives it size 0,
    so the result is empty or zero (a size taken as max(0, 1) = 1 reads past the empty dimension)."""
    shared, a, b = pick(g, ["jik", "kab", "nXi"])
    terms = [a + shared if pick(g, [True, False]) else shared + a, shared + b]
    empty = pick(g, [0, 1])
    sizes = {a: pick(g, [1, 2, 3]), b: pick(g, [1, 2, 3])}
    shapes = [tuple((0 if n == empty else 1) if c == shared else sizes[c] for c in term)
              for n, term in enumerate(terms)]
    kept = [c for c in (a, shared, b) if pick(g, [True, True, False])]
    output = "".join(kept[i] for i in torch.randperm(len(kept), generator=g).tolist())
    return ",".join(terms) + "->" + output, shapes


def _einsum_public() -> list[Group]:
    g = torch.Generator().manual_seed(3)
    f32 = torch.float32
    return [
        Group("the definition: ij,jk->ijk, ij,jk->ik, ii->i", [
            _case("ij,jk->ijk", [(2, 3), (3, 4)], f32, g, ""),
            _case("ij,jk->ik", [(2, 3), (3, 4)], f32, g, ""),
            _case("ii->i", [(3, 3)], f32, g, ""),
        ]),
        Group("outputs in the order written, not sorted", [
            _case("ij->ji", [(2, 3)], f32, g, "a transpose"),
            _case("ij,jk->ki", [(2, 3), (3, 4)], f32, g, "(A @ B) transposed"),
            _case("bij,bjk->ibk", [(2, 3, 2), (2, 2, 3)], f32, g, "batch in the middle"),
        ]),
        Group("each operand read in its own label order", [
            _case("ij,kj->ik", [(2, 3), (4, 3)], f32, g, "A @ B.T: B's labels are k, j"),
            _case("abc,cab->b", [(2, 3, 4), (4, 2, 3)], torch.float64, g, "shared labels in another order"),
        ]),
        Group("int64 and float64 keep their dtype; scalar results", [
            _case("ij,jk->ik", [(2, 3), (3, 2)], torch.int64, g, "int64 matmul"),
            _case("i,i->", [(4,), (4,)], torch.float64, g, "float64 dot product: a 0-d result"),
            _case("ij->", [(3, 2)], torch.int64, g, "int64 sum of everything"),
        ]),
        Group("diagonals: a label repeated inside one operand", [
            _case("ii->", [(4, 4)], torch.int64, g, "trace"),
            _case("iij->ji", [(2, 2, 3)], f32, g, "diagonal of the first two dimensions"),
            _case("ij,jj->i", [(2, 3), (3, 3)], torch.float64, g, "A times diag(B), summed"),
        ]),
        Group("size-1 dimensions broadcast", [
            _case("ij,jk->ik", [(2, 1), (3, 4)], torch.float64, g, "A's j has size 1, B's has size 3"),
            _case("i,i->i", [(1,), (4,)], torch.int64, g, "one entry times four"),
            _case("ij,ij->ij", [(3, 1), (1, 4)], f32, g, "an outer product by broadcasting"),
        ]),
        Group("three operands, and a 0-d operand", [
            _case("ij,jk,kl->li", [(2, 3), (3, 2), (2, 2)], torch.float64, g, "a chain of three"),
            _case("i,->i", [(3,), ()], torch.int64, g, "a vector times a 0-d tensor"),
        ]),
        Group("empty dimensions: size 0 against size 1 is 0", [
            _case("ij,jk->ik", [(2, 0), (1, 3)], torch.float64, g, "j has sizes 0 and 1: a sum of nothing, zeros"),
            _case("i,i->i", [(1,), (0,)], torch.int64, g, "i has sizes 1 and 0: an empty result"),
        ]),
    ]


def _einsum_hidden(g: torch.Generator) -> list[Group]:
    groups = []
    for dtype in (torch.float64, torch.int64):
        cases = []
        for _ in range(6):
            equation, shapes = random_equation(g)
            cases.append(_case(equation, shapes, dtype, g, f"{equation} with shapes {shapes}"))
        groups.append(Group(f"random {str(dtype).removeprefix('torch.')} equations", cases))
    empty = [empty_dimension_case(g) for _ in range(2)]
    groups.append(Group("random equations with a label of sizes 0 and 1",
                        [_case(e, shapes, torch.float64, g, f"{e} with shapes {shapes}") for e, shapes in empty]))
    return groups


# ---------------------------------------------------------------- exercise 1: einsum_loops


def _einsum_truth(equation: str, *operands: torch.Tensor) -> torch.Tensor:
    """``torch.einsum``, the ground truth; integer operands on a GPU are contracted on the CPU, since
    torch's CUDA matrix products have no integer kernels ("baddbmm_cuda" not implemented for 'Long')."""
    device = operands[0].device
    if device.type == "cuda" and not operands[0].is_floating_point():
        return torch.einsum(equation, *[op.cpu() for op in operands]).to(device)
    return torch.einsum(equation, *operands)


def _definition_through_library(learner_fn: Callable[..., Any], equation: str, *operands: torch.Tensor) -> Any:
    """The library's pipeline (`einsum_by_definition`) with the learner's `einsum_loops` in it."""
    with substitute(einsum_loops=learner_fn):
        return loops.einsum_by_definition(equation, *operands)


EINSUM_LOOPS = Exercise(
    id="nb03_einsum_loops.einsum_loops",
    reference=_einsum_truth,
    public=_einsum_public,
    hidden=_einsum_hidden,
    hint="loop over every label of the equation; at each point multiply one entry of each operand "
         "and add the product into the result at the output labels' values (start from zeros)",
    forbidden=NOT_LOOPS + ("tensorcraft.einstein.loops.einsum_loops.library",
                           # the loops the library's code generator writes are the answer too
                           "tensorcraft.einstein.loops.loop_code.library", "tensorcraft.einstein.loops.loop_code",
                           "tensorcraft.einstein.loops.generated_function"),
    forbidden_ops=NOT_LOOP_OPS,
    numpy_allowed=False,
    call=_definition_through_library,
    show=as_call("einsum_loops"),
    on_meta=on_meta(_einsum_public),   # the result created on the operands' device, not the CPU's
    extra_hints={
        IndexError: "an index is out of range: a dimension of size 1 that broadcasts must be read at index 0, "
                    "and a label runs over its size where that is not 1, even 0 (max(0, 1) is 1: an empty "
                    "dimension against size 1 leaves the label size 0)",
        RecursionError: "your function calls the library's einsum_loops, which, while the check runs, is your "
                        "own function again: write the loops yourself",
    },
)


def check_einsum_loops(einsum_loops, hidden: bool = False) -> None:
    """Check ``einsum_loops(equation, *operands)`` against torch.einsum, run inside the library's pipeline."""
    EINSUM_LOOPS.check(einsum_loops, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: loop_code


class NotLoopsError(Exception):
    """The generated source computes the result without loops, or with a forbidden function."""


# names the generated source may not mention: they compute (part of) an einsum without loops
NOT_LOOP_NAMES = frozenset({
    "einsum", "matmul", "bmm", "mm", "mv", "dot", "vdot", "tensordot", "inner", "outer", "kron",
    "sum", "prod", "diagonal", "diag", "trace", "contract", "addmm", "baddbmm", "addbmm", "addmv",
    "exec", "eval", "__import__",
})
ALLOWED_IMPORTS = frozenset({"torch", "math", "itertools"})


def require_loops(source: Any, equation: str) -> None:
    """Raise NotLoopsError unless ``source`` computes with one ``for`` loop per label and nothing
    that does an einsum's work for it. (Sources that are no str, or no Python, are left for the
    library to report.)"""
    if not isinstance(source, str):
        return
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name in NOT_LOOP_NAMES:
            raise NotLoopsError(f"the generated source uses {name!r}, which does the work that the loops must do")
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
            raise NotLoopsError("the generated source uses the @ operator (a matrix product) instead of loops")
        if isinstance(node, ast.Import):
            modules = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [(node.module or "").split(".")[0]]
        else:
            continue
        for module in modules:
            if module not in ALLOWED_IMPORTS:
                raise NotLoopsError(f"the generated source imports {module!r}; it may import only "
                                    f"{', '.join(sorted(ALLOWED_IMPORTS))}")
    labels = {c for c in equation.split("->")[0] if c.isalpha()}
    fors = sum(isinstance(node, ast.For) for node in ast.walk(tree))
    if fors < len(labels):
        raise NotLoopsError(f"the generated source has {fors} for loop(s) for the {len(labels)} label(s) "
                            f"of {equation!r}: write one loop per label")


def _generated_through_library(learner_fn: Callable[..., Any], equation: str, *operands: torch.Tensor) -> Any:
    """The library's pipeline runs the source the learner's `loop_code` writes, after we read it."""
    def inspected(eq: str, *shapes: tuple[int, ...]) -> Any:
        source = learner_fn(eq, *shapes)
        require_loops(source, eq)
        return source

    with substitute(loop_code=inspected):
        return loops.einsum_by_definition(equation, *operands, generated=True)


def _code_public() -> list[Group]:
    g = torch.Generator().manual_seed(5)
    f64 = torch.float64
    return [
        Group("matmul, and its transpose", [
            _case("ij,jk->ik", [(2, 3), (3, 4)], f64, g, ""),
            _case("ij,jk->ki", [(2, 3), (3, 2)], f64, g, "the output order as written"),
            _case("ij,kj->ik", [(2, 3), (4, 3)], f64, g, "each operand indexed in its own label order"),
        ]),
        Group("diagonals, scalars and int64", [
            _case("ii->i", [(3, 3)], torch.int64, g, "the diagonal"),
            _case("ii->", [(3, 3)], torch.int64, g, "the trace: a 0-d result"),
            _case("i,->i", [(3,), ()], f64, g, "times a 0-d tensor"),
        ]),
        Group("size-1 dimensions broadcast; three operands", [
            _case("ij,jk->ik", [(2, 1), (3, 2)], f64, g, "A's j has size 1"),
            _case("bij,bjk,bk->bi", [(1, 2, 2), (2, 2, 3), (2, 3)], torch.int64, g, "batch of size 1 in A"),
        ]),
        Group("an empty dimension: size 0 against size 1 is 0", [
            _case("ij,jk->ik", [(2, 0), (1, 3)], f64, g, "j has sizes 0 and 1: zeros"),
        ]),
    ]


def _code_hidden(g: torch.Generator) -> list[Group]:
    cases = []
    for dtype in (torch.float64, torch.int64, torch.float64, torch.int64, torch.float64, torch.int64):
        equation, shapes = random_equation(g, max_points=32)
        cases.append(_case(equation, shapes, dtype, g, f"{equation} with shapes {shapes}, {str(dtype)[6:]}"))
    equation, shapes = empty_dimension_case(g)
    return [Group("random equations", cases),
            Group("a random equation with a label of sizes 0 and 1",
                  [_case(equation, shapes, torch.int64, g, f"{equation} with shapes {shapes}")])]


LOOP_CODE = Exercise(
    id="nb03_einsum_loops.loop_code",
    reference=_einsum_truth,
    public=_code_public,
    hidden=_code_hidden,
    hint="print `import torch`, then `def einsum_loops_generated(op0, op1, ...):`, a zero result of the "
         "output's shape, one `for` per label (output labels outermost), and one line "
         "`out[...] += op0[...] * op1[...]` at the innermost level; print(your source) to read it",
    forbidden=NOT_LOOPS + ("tensorcraft.einstein.loops.loop_code.library",),
    forbidden_ops=NOT_LOOP_OPS,
    numpy_allowed=False,
    call=_generated_through_library,
    on_meta=on_meta(_code_public),   # the generated code creates its result on the operands' device
    show=lambda equation, *operands: f"loop_code({equation!r}, {', '.join(str(tuple(o.shape)) for o in operands)})",
    extra_hints={
        NotLoopsError: "the generated function must compute with loops: one `for` per label, indexing single "
                       "entries, and only + and * (no einsum, matmul, @, sum or diagonal)",
        NameError: "the generated code uses a name it never defines: every label needs its own loop "
                   "(summed labels too), and the source must `import torch` itself",
        IndexError: "an index is out of range in the generated code: a dimension of size 1 that broadcasts "
                    "must be read at index 0, and a label's loop runs over its size where that is not 1, even 0 "
                    "(max(0, 1) is 1)",
        SyntaxError: "the generated source is not valid Python: print it and read it",
        ValueError: "the source must define a function called einsum_loops_generated",
    },
)


def check_loop_code(loop_code, hidden: bool = False) -> None:
    """Check ``loop_code(equation, *shapes)``: the library runs the source it returns, against torch.einsum."""
    LOOP_CODE.check(loop_code, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: count_iterations


def _count_reference(equation: str, *shapes: tuple[int, ...]) -> int:
    """torch.einsum of ones summed over every label: one per point of the index space."""
    inputs = equation.split("->")[0]
    return int(torch.einsum(inputs + "->", *[torch.ones(s, dtype=torch.int64) for s in shapes]))


def _count_through_library(learner_fn: Callable[..., Any], equation: str, *shapes: tuple[int, ...]) -> Any:
    """The count the library's pipeline gets from the learner's stage, before any loop would run."""
    operands = [torch.empty(shape) for shape in shapes]
    with substitute(count_iterations=learner_fn):
        return loops.bind_call(equation, *operands).iterations


def _count_public() -> list[Group]:
    def c(equation: str, *shapes: tuple[int, ...], note: str = "") -> Case:
        return Case((equation, *shapes), note or equation)
    return [
        Group("the definition's three examples", [
            c("ij,jk->ijk", (2, 3), (3, 4)), c("ij,jk->ik", (2, 3), (3, 4)), c("ii->i", (5, 5)),
        ]),
        Group("a label counts once, summed or kept", [
            c("bij,bjk->bik", (2, 3, 4), (2, 4, 5), note="batched matmul"),
            c("ij,ij->", (3, 4), (3, 4), note="a label shared by two operands"),
            c("ii->", (6, 6), note="a trace: i is one label"),
            c("ij,jk,kl->il", (2, 3), (3, 4), (4, 5), note="three operands"),
        ]),
        Group("broadcast sizes, 0-d operands, empty dimensions", [
            c("ij,jk->ij", (2, 1), (7, 3), note="j has size 7: size 1 broadcasts"),
            c("ij,jk->ij", (2, 7), (1, 3), note="j has sizes 7 and 1: size 1 broadcasts wherever it comes"),
            c("i,->i", (4,), (), note="a 0-d operand has no labels"),
            c("ij,jk->ik", (2, 0), (0, 3), note="a dimension of size 0: nothing to do"),
        ]),
    ]


def _count_hidden(g: torch.Generator) -> list[Group]:
    cases = []
    for _ in range(10):
        equation, shapes = random_equation(g, max_points=10_000)
        cases.append(Case((equation, *shapes), f"{equation} with shapes {shapes}"))
    return [Group("random equations", cases)]


COUNT_ITERATIONS = Exercise(
    id="nb03_einsum_loops.count_iterations",
    reference=_count_reference,
    public=_count_public,
    hidden=_count_hidden,
    hint="the loops run once per combination of label values: multiply the sizes of all the "
         "labels, each label once, with its broadcast size (its size where it is not 1)",
    forbidden=("torch.einsum", "numpy.einsum", "tensorcraft.einsum", "opt_einsum.contract_path",
               "tensorcraft.einstein.parse.parse_equation", "tensorcraft.einstein.path.contract_path",
               "tensorcraft.einstein.loops.count_iterations.library", "numpy._core.einsumfunc.c_einsum"),
    answers=EQUATION_READERS,
    forbidden_ops=("einsum",),
    call=_count_through_library,
    show=as_call("count_iterations"),
    extra_hints={TypeError: "return a Python int (math.prod of ints is one; / makes a float)"},
)


def check_count_iterations(count_iterations, hidden: bool = False) -> None:
    """Check ``count_iterations(equation, *shapes)`` against torch.einsum's sum of ones."""
    COUNT_ITERATIONS.check(count_iterations, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (EINSUM_LOOPS, LOOP_CODE, COUNT_ITERATIONS)}
