"""Checks for notebook 02 (how einsum reads an equation).

Ground truth is torch.einsum's behaviour: which equations it accepts, the output it infers (read
back from the shape of its result, every label having a size of its own), and the size it gives
each label. ``infer_output`` is also run inside the library's pipeline: ``tc.einsum`` with the
learner's function substituted for the stage, compared with ``torch.einsum``.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

import tensorcraft
import tensorcraft.einstein.api as einstein_api
from tensorcraft.einstein.parse import EinsumError

from .exercise import Case, Exercise, Group, as_call
from .reach import EQUATION_READERS
from .seed import draw, pick
from .tripwire import ForbiddenCallError

# Captured at import, so that tripwires set while a learner's code runs do not reach our own use.
_torch_einsum = torch.einsum
_tc_einsum = einstein_api.einsum

EINSUM_NAMES = ("torch.einsum", "numpy.einsum", "tensorcraft.einsum", "tensorcraft.einstein.einsum",
                "tensorcraft.einstein.parse_equation", "tensorcraft.einstein.parse.parse_equation",
                "opt_einsum.contract",
                # a path search's report holds the output's letters and each letter's length: the answer
                "opt_einsum.contract_path", "opt_einsum.contract.contract_path", "tensorcraft.contract_path",
                "tensorcraft.einstein.contract_path", "tensorcraft.einstein.path.contract_path",
                # what numpy.einsum calls, looked up at each call: catches numpy.einsum kept under any name
                "numpy._core.einsumfunc.c_einsum")
EINSUM_OPS = ("einsum",)  # torch.einsum by any route: torch.ops.aten.einsum, a reference kept in a dict
ELLIPSIS = "..."
ELLIPSIS_DIMS = 2   # '...' covers two dimensions in infer_output's cases, so that torch's result shows them


# ---------------------------------------------------------------- exercise 1: infer_output


def _labelled_operands(inputs: str) -> tuple[list[torch.Tensor], dict[int, str]]:
    """Operands for an implicit equation in which every letter, and each ellipsis dimension, has a
    size of its own; returns them with the map size -> label that reads a result's shape back."""
    letters = sorted({c for c in inputs.replace(ELLIPSIS, "") if c != ","})
    sizes = {c: 2 + n for n, c in enumerate(letters)}
    ellipsis_sizes = [2 + len(letters) + k for k in range(ELLIPSIS_DIMS)]
    g = torch.Generator().manual_seed(len(inputs))
    operands = []
    for term in inputs.split(","):
        before, dots, after = term.partition(ELLIPSIS)
        shape = [sizes[c] for c in before] + (ellipsis_sizes if dots else []) + [sizes[c] for c in after]
        operands.append(torch.randint(-3, 4, shape, generator=g).to(torch.float64))
    labels = {size: c for c, size in sizes.items()} | {size: ELLIPSIS for size in ellipsis_sizes}
    return operands, labels


def _torch_implicit_output(inputs: str) -> tuple[str, torch.Tensor]:
    """torch's implicit output for ``inputs``, read back from its result's shape; and the result."""
    operands, labels = _labelled_operands(inputs)
    result = _torch_einsum(inputs, *operands)
    output = ""
    for size in result.shape:
        label = labels[size]
        if label != ELLIPSIS or not output.endswith(ELLIPSIS):
            output += label
    return output, result


def _entered_once(learner_fn: Callable[[str], str]) -> Callable[[str], str]:
    """The learner's function as the pipeline's stage, refusing to be entered again while it runs: the
    stage calls the learner's function, so re-entry proves the function called the stage itself (the
    library's ``infer_output`` kept under a name of its own), which would otherwise end in RecursionError."""
    running: list[bool] = []

    def stage(inputs: str) -> str:
        if running:
            raise ForbiddenCallError("your infer_output called the library's own infer_output (kept under a name "
                                     "of its own), which the exercise asks you to do without: inside tc.einsum it "
                                     "calls your function again")
        running.append(True)
        try:
            return learner_fn(inputs)
        finally:
            running.pop()
    return stage


def run_infer_output(learner_fn: Callable[[str], str], inputs: str) -> tuple[Any, Any]:
    """The learner's answer, and tc.einsum's result with the learner's function as its implicit-output stage."""
    answer = learner_fn(inputs)
    operands, _ = _labelled_operands(inputs)
    with tensorcraft.substitute(infer_output=_entered_once(learner_fn)):
        try:
            result: Any = _tc_einsum(inputs, *operands)
        except EinsumError as error:
            result = f"tc.einsum with your infer_output raised EinsumError: {error}"
    return answer, result


def _infer_public() -> list[Group]:
    def cases(*inputs: str) -> list[Case]:
        return [Case((i,)) for i in inputs]
    return [
        Group("two operands: letters used once, sorted (not in order of appearance)",
              cases("ij,jk", "ijd,jk", "ji,kj", "bij,bjk")),
        Group("uppercase before lowercase", cases("cBa", "aB", "Ij,jK", "bZ,Za", "Ab")),
        Group("a letter repeated inside one operand", cases("iij,jk", "ii", "iij", "ii,jk", "ijj,k")),
        Group("ellipsis dimensions first", cases("...ij,...jk", "Z...a", "i...,j", "ab...", "...,...", "ij,...jk")),
        Group("single operands", cases("ij", "ji", "cba", "I")),
        Group("three operands; a letter used three times", cases("ab,bc,cd", "ab,bc,b,cd", "ab,ab,ab", "i,j,k", "xY,Yz,zX")),
    ]


def _random_inputs(g: torch.Generator, operands: int, ellipsis: bool, pool: str) -> str:
    letters = [pool[i] for i in torch.randperm(len(pool), generator=g)[: draw(g, 2, 6)].tolist()]
    terms = []
    for _ in range(operands):
        term = "".join(pick(g, letters) for _ in range(draw(g, 0, 4)))
        if ellipsis and draw(g, 0, 3):
            at = draw(g, 0, len(term) + 1)
            term = term[:at] + ELLIPSIS + term[at:]
        terms.append(term)
    return ",".join(terms)


def _infer_hidden(g: torch.Generator) -> list[Group]:
    def group(title: str, count: int, **kw: Any) -> Group:
        return Group(title, [Case((_random_inputs(g, operands=draw(g, *kw["operands"]), ellipsis=kw["ellipsis"],
                                                  pool=kw["pool"]),)) for _ in range(count)])
    return [
        group("random lowercase equations", 6, operands=(2, 4), ellipsis=False, pool="abcdijkxyz"),
        group("random equations with uppercase letters", 6, operands=(1, 4), ellipsis=False, pool="abcijABCIZ"),
        group("random equations with an ellipsis", 6, operands=(1, 4), ellipsis=True, pool="abijkAZ"),
        group("random single operands", 5, operands=(1, 2), ellipsis=True, pool="abcBC"),
    ]


INFER_OUTPUT = Exercise(
    id="nb02_einsum_parsing.infer_output",
    reference=_torch_implicit_output,
    public=_infer_public,
    hidden=_infer_hidden,
    hint="count every letter over the whole input side; keep those used exactly once, sorted by code point "
         "(sorted() on the letters); put '...' first when any operand has one",
    call=run_infer_output,
    show=lambda inputs: f"infer_output({inputs!r})",
    parts=("your answer", "tc.einsum's result with your infer_output"),
    answers=EQUATION_READERS,
    forbidden=EINSUM_NAMES + ("tensorcraft.einstein.infer.infer_output.library",  # first: the stage holds it
                              "tensorcraft.einstein.infer.infer_output", "tensorcraft.einstein.infer_output"),
    forbidden_ops=EINSUM_OPS,
)


def check_infer_output(infer_output, hidden: bool = False) -> None:
    """Check ``infer_output(inputs)`` against torch's implicit output, alone and inside tc.einsum.

    Each case prints as (your answer, tc.einsum's result with your function as its stage)."""
    INFER_OUTPUT.check(infer_output, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: validate_equation


ACCEPTED = "accepted (returned None)"
# for a learner who signals a rejection as torch does (RuntimeError) or with assert
NOT_VALUE_ERROR = ("signal a rejection with `raise ValueError(message)`: torch raises RuntimeError, but this "
                   "exercise asks for ValueError (an assert raises AssertionError)")
REJECTED = "rejected (raised ValueError)"


def _torch_verdict(equation: str, ndims: tuple[int, ...]) -> str:
    """torch.einsum on operands of ``ndims`` dimensions, every size 2: does it accept the equation?"""
    try:
        _torch_einsum(equation, *[torch.zeros((2,) * n) for n in ndims])
    except Exception:  # RuntimeError from torch; with 3+ operands torch asks opt_einsum first, whose own
        # ValueError, IndexError or KeyError (e.g. a ',' in the output) reaches the caller as it is
        return REJECTED
    return ACCEPTED


def run_validator(learner_fn: Callable[..., Any], *args: Any) -> Any:
    """The learner's verdict, in the reference's terms: a ValueError is a rejection, None an acceptance.

    Comparing verdicts (rather than expecting an exception) lets a wrong verdict be diagnosed by the
    mutants, e.g. "you removed all spaces first" for a validator that accepts 'ij- >ji'."""
    try:
        result = learner_fn(*args)
    except ValueError:
        return REJECTED
    return ACCEPTED if result is None else result


def run_sizes(learner_fn: Callable[..., Any], *args: Any) -> Any:
    """The learner's dict of sizes, or REJECTED where it raised ValueError (see run_validator)."""
    try:
        return learner_fn(*args)
    except ValueError:
        return REJECTED


def _validation_case(equation: str, ndims: tuple[int, ...], note: str = "") -> Case:
    return Case((equation, ndims), note)


def _validate_public() -> list[Group]:
    c = _validation_case
    return [
        Group("valid equations: return None", [
            c("ij,jk->ik", (2, 2)), c("i j , j k -> i k", (2, 2), "spaces between subscripts"),
            c("...ij,...jk", (3, 2), "ellipsis"), c(" ij->", (2,), "empty output: a scalar"),
            c("ii", (2,), "a repeated letter"), c("ij,->", (2, 0), "a scalar operand"),
            c("aB->Ba", (2,)), c("ij->...ij", (2,), "an output ellipsis with none in the inputs"),
            c("i...->", (1,), "an ellipsis covering no dimension"),
        ]),
        Group("characters torch rejects", [
            c("i1", (2,)), c("i\tj", (2,), "a tab"), c("ij->é", (2,), "a letter outside [a-zA-Z]"),
            c("éi->ié", (2,), "a letter outside [a-zA-Z], used consistently"),
            c("ij- >ji", (2,), "a space inside '->'"), c("ij->ij->i", (2,), "two arrows"),
            c("ij>ji", (2,)), c("ij-ji", (2,)), c("ij->i,j", (2,), "a comma in the output"),
        ]),
        Group("ellipsis rules", [
            c("..ij", (3,), "two dots"), c(". ..ij", (3,), "a space inside '...'"),
            c("i...j...", (3,), "two ellipses in one operand"), c("i...->...i...", (2,), "two ellipses in the output"),
        ]),
        Group("number of operands and of dimensions", [
            c("ij,jk", (2,), "fewer operands than terms"), c("ij", (2, 2), "more operands than terms"),
            c("ij", (3,), "a letter missing"), c("ijk...", (2,), "more letters than dimensions"),
        ]),
        Group("output rules", [
            c("ij->ii", (2,), "a repeated output letter"), c("ij->k", (2,), "an output letter no input has"),
            c("m,d->nd", (1, 1), "the source's example"),
        ]),
    ]


NOISE = [" ", ".", ",", "-", ">", "->", "...", "- >", ". ..", "1", "\t", "a", "Z", "i", "é"]


def _random_equation(g: torch.Generator) -> tuple[str, tuple[int, ...]]:
    """A valid equation and its operands' ranks, then zero to two edits that often break it."""
    letters = "abcijkBX"
    terms, ndims = [], []
    for _ in range(draw(g, 1, 4)):
        term = "".join(pick(g, letters) for _ in range(draw(g, 0, 4)))
        ndim = len(term)
        if draw(g, 0, 4) == 0:
            at = draw(g, 0, len(term) + 1)
            term, ndim = term[:at] + ELLIPSIS + term[at:], ndim + draw(g, 0, 3)
        terms.append(term)
        ndims.append(ndim)
    equation = ",".join(terms)
    if draw(g, 0, 2):
        used = sorted({c for c in equation if c.isalpha()})
        equation += "->" + "".join(pick(g, used) for _ in range(draw(g, 0, len(used) + 1))) if used else "->"
    for _ in range(draw(g, 0, 3)):
        kind = draw(g, 0, 4)
        if kind == 0:
            at = draw(g, 0, len(equation) + 1)
            equation = equation[:at] + pick(g, NOISE) + equation[at:]
        elif kind == 1 and equation:
            at = draw(g, 0, len(equation))
            equation = equation[:at] + equation[at + 1:]
        elif kind == 2:
            n = draw(g, 0, len(ndims))
            ndims[n] = max(0, ndims[n] + pick(g, [-1, 1]))
        elif kind == 3:
            equation = equation.replace(",", " , ").replace("->", " -> ")
    return equation, tuple(ndims)


def _validate_hidden(g: torch.Generator) -> list[Group]:
    accepted, rejected = [], []
    for _ in range(400):
        if len(accepted) >= 8 and len(rejected) >= 8:
            break
        equation, ndims = _random_equation(g)
        case = _validation_case(equation, ndims)
        (rejected if _torch_verdict(equation, ndims) == REJECTED else accepted).append(case)
    return [Group("random equations torch accepts", accepted[:8]),
            Group("random equations torch rejects", rejected[:8])]


VALIDATE_EQUATION = Exercise(
    id="nb02_einsum_parsing.validate_equation",
    reference=_torch_verdict,
    call=run_validator,
    show=as_call("validate_equation"),
    public=_validate_public,
    hidden=_validate_hidden,
    hint="go through the rules in order: the characters (letters, ',', spaces, '...', one '->'), the ellipses, "
         "the number of terms, each term's letters against its operand's dimensions, then the output's letters",
    forbidden=EINSUM_NAMES,
    answers=EQUATION_READERS,
    forbidden_ops=EINSUM_OPS,
    extra_hints={RuntimeError: NOT_VALUE_ERROR, AssertionError: NOT_VALUE_ERROR},
)


def check_validate_equation(validate_equation, hidden: bool = False) -> None:
    """Check ``validate_equation(equation, ndims)``: None where torch accepts, ValueError where it raises."""
    VALIDATE_EQUATION.check(validate_equation, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: label_sizes


def _torch_label_sizes(equation: str, *shapes: tuple[int, ...]) -> dict[str, int] | str:
    """Each letter's size as torch sees it (the length of the one-axis result '<inputs>-><letter>'),
    or REJECTED where torch raises for these shapes."""
    inputs = equation.split("->")[0]
    operands = [torch.zeros(s) for s in shapes]
    try:
        _torch_einsum(equation, *operands)
    except (RuntimeError, ValueError):
        return REJECTED
    letters = sorted({c for c in inputs if c.isalpha()})
    return {c: _torch_einsum(f"{inputs}->{c}", *operands).shape[0] for c in letters}


def _sizes_case(equation: str, *shapes: tuple[int, ...], note: str = "") -> Case:
    return Case((equation, *shapes), note)


def _sizes_public() -> list[Group]:
    c = _sizes_case
    return [
        Group("equal sizes", [c("ij,jk->ik", (2, 3), (3, 4)), c("bij,bjk", (5, 2, 3), (5, 3, 4)),
                              c("i j , j k", (2, 3), (3, 4), note="spaces")]),
        Group("size 1 broadcasts", [c("ij,jk", (2, 1), (4, 5)), c("ij,ij->i", (2, 1), (1, 3)),
                                    c("i,i", (1,), (1,), note="size 1 everywhere"), c("ab,b,a", (1, 3), (3,), (4,))]),
        Group("a letter repeated inside one operand", [c("ii", (3, 3)), c("iij->j", (2, 2, 4)), c("ii,i", (1, 1), (3,))]),
        Group("errors: shapes that do not fit the equation", [
            c("ij,j,jk", (2, 3), (4,), (2, 5), note="j is 3, 4 and 2"), c("ij,jk", (2, 3), (4, 5), note="j is 3 and 4"),
            c("ii", (1, 3), note="a diagonal of sizes 1 and 3"),
            c("ii", (2, 3)), c("ij,jk->ik", (2, 3, 1), (3, 4), note="three dimensions for two letters"),
            c("ij,j", (2,), (2,), note="one dimension for two letters"),
        ]),
        Group("empty dimensions: size 0 broadcasts against 1 only", [
            c("ij,jk", (2, 0), (1, 3), note="j is 0 and 1: j = 0"), c("i,i", (1,), (0,), note="i is 1 and 0: i = 0"),
            c("ij,jk", (2, 0), (3, 4), note="j is 0 and 3: an error"),
        ]),
    ]


def _random_sizes_case(g: torch.Generator) -> Case:
    letters = "abijkAB"
    size = {c: draw(g, 2, 6) for c in letters}
    terms, shapes = [], []
    for _ in range(draw(g, 1, 4)):
        term = "".join(pick(g, letters[:4]) for _ in range(draw(g, 1, 4)))
        shape = [size[c] for c in term]
        for c in set(term):   # sometimes this operand holds size 1 for a letter (everywhere it stands)
            if draw(g, 0, 4) == 0:
                shape = [1 if t == c else s for t, s in zip(term, shape)]
        terms.append(term)
        shapes.append(shape)
    edit = draw(g, 0, 5)
    if edit == 0:           # a size that does not broadcast
        n = draw(g, 0, len(shapes))
        d = draw(g, 0, len(shapes[n]))
        shapes[n][d] = shapes[n][d] + 1
    elif edit == 1:         # a dimension too many
        n = draw(g, 0, len(shapes))
        shapes[n].append(2)
    return _sizes_case(",".join(terms), *[tuple(s) for s in shapes])


def _empty_sizes_case(g: torch.Generator) -> Case:
    """Two operands that share a letter of size 0 in one and 1 in the other (torch: the letter is 0)."""
    shared, first, second = _permuted_letters("jabk", g)[:3]
    size = {first: draw(g, 1, 5), second: draw(g, 1, 5)}
    terms = ["".join(_permuted_letters(shared + first, g)), "".join(_permuted_letters(shared + second, g))]
    zero, one = (0, 1) if draw(g, 0, 2) else (1, 0)
    shapes = [tuple(zero if c == shared else size[c] for c in terms[0]),
              tuple(one if c == shared else size[c] for c in terms[1])]
    return _sizes_case(",".join(terms), *shapes)


def _permuted_letters(letters: str, g: torch.Generator) -> list[str]:
    return [letters[i] for i in torch.randperm(len(letters), generator=g).tolist()]


def _sizes_hidden(g: torch.Generator) -> list[Group]:
    cases = [_random_sizes_case(g) for _ in range(40)]
    verdicts = [_torch_label_sizes(*case.args) == REJECTED for case in cases]
    valid = [c for c, rejected in zip(cases, verdicts) if not rejected][:8]
    invalid = [c for c, rejected in zip(cases, verdicts) if rejected][:6]
    return [Group("random operands that fit", valid), Group("random operands that do not fit", invalid),
            Group("a letter of size 0 in one operand and 1 in the other", [_empty_sizes_case(g) for _ in range(3)])]


LABEL_SIZES = Exercise(
    id="nb02_einsum_parsing.label_sizes",
    reference=_torch_label_sizes,
    call=run_sizes,
    show=as_call("label_sizes"),
    public=_sizes_public,
    hidden=_sizes_hidden,
    hint="walk through each operand's letters with its shape: one letter per dimension; inside one operand a "
         "repeated letter needs equal sizes; across operands sizes must be equal or 1, and the size that is "
         "not 1 wins; raise ValueError otherwise",
    forbidden=EINSUM_NAMES,
    answers=EQUATION_READERS,
    forbidden_ops=EINSUM_OPS,
    extra_hints={RuntimeError: NOT_VALUE_ERROR, AssertionError: NOT_VALUE_ERROR},
)


def check_label_sizes(label_sizes, hidden: bool = False) -> None:
    """Check ``label_sizes(equation, *shapes)``: each letter's size after broadcasting, or ValueError."""
    LABEL_SIZES.check(label_sizes, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (INFER_OUTPUT, VALIDATE_EQUATION, LABEL_SIZES)}
