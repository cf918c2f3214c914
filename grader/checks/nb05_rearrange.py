"""Checks for notebook 05 (rearrange): the parser of one side, the plan, and rearrange itself.

Ground truth is einops: ``einops.parsing.ParsedExpression`` for the parse, ``einops.rearrange``
(and ``reduce``/``repeat``) for every result and every error. The learner's ``parse_expression``
and ``make_plan`` run inside tensorcraft's pipeline, substituted with ``tensorcraft.substitute``;
the learner's ``rearrange`` runs on its own and inside ``nn.Sequential(Rearrange(...))``.
While the learner's code runs, einops and tensorcraft's rearrange machinery are tripwires.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import einops
import torch
from einops.parsing import ParsedExpression

import tensorcraft as tc
from tensorcraft.einops.layers import Rearrange
from tensorcraft.einops.ops import rearrange as tc_rearrange, reduce as tc_reduce, repeat as tc_repeat
from tensorcraft.einops.pattern import ELLIPSIS, AnonymousAxis, Expression

from ..mutants import mutants_for
from .compare import describe
from .exercise import Case, Exercise, Group
from .report import FAIL, NO_ERROR, WRONG_ERROR, GroupOutcome
from .seed import draw

# Everything that would do the exercise for the learner. Only module attributes the pipeline does
# not look up at run time are listed, so that the pipeline around the learner's stage still runs
# (the checks call tensorcraft through the names imported above, which the tripwires leave alone).
FORBIDDEN = (
    # a stage's `.library` is the library's own function, undecorated: nothing in the pipeline reads it.
    # Listed before the stages themselves, which the tripwires replace in this order
    "tensorcraft.einops.pattern.parse_expression.library", "tensorcraft.einops.recipe.make_recipe.library",
    "tensorcraft.einops.recipe.make_plan.library", "tensorcraft.einops.ops.rearrange.library",
    "einops.rearrange", "einops.reduce", "einops.repeat", "einops.einops.rearrange",
    "einops.einops.reduce", "einops.einops.repeat", "einops.einops._apply_recipe",
    "einops.einops._prepare_transformation_recipe", "einops.parsing.ParsedExpression",
    "einops.einops.ParsedExpression", "einops.layers.torch.Rearrange",
    "tensorcraft.rearrange", "tensorcraft.einops.rearrange", "tensorcraft.einops.ops.rearrange",
    "tensorcraft.repeat", "tensorcraft.einops.repeat", "tensorcraft.einops.ops.repeat",
    "tensorcraft.reduce", "tensorcraft.einops.reduce", "tensorcraft.einops.ops.reduce",
    "tensorcraft.einops.pattern.parse_expression", "tensorcraft.einops.recipe.make_recipe",
    "tensorcraft.einops.recipe.make_plan", "tensorcraft.einops.recipe.plan_for",
    "tensorcraft.einops.backends.compile_steps",
)
# rearrange replaces the whole pipeline, so its check may also forbid what the pipeline runs on
# (the Rearrange layer reaches the learner's function through `transform`, which stays callable)
FORBIDDEN_IN_REARRANGE = FORBIDDEN + ("tensorcraft.einops.ops.apply", "tensorcraft.einops.ops.steps_for")
LAYER = "through nn.Sequential(Rearrange(...))"  # a case argument: run inside the layer, not directly
GRADIENT = "with autograd"  # a case argument: x requires grad; compare the result and x.grad after a backward
ERROR = einops.EinopsError
# A fallback hint names a cause only where the error's message establishes it; otherwise it says what happened.
RUNTIME_HINT = ("torch raised RuntimeError inside your function (its message is above): compare what you passed "
                "that operation (a shape, a list of dimensions) with the pattern, step by step")
VIEW_HINT = ("'view size is not compatible' means .view on a permuted (non-contiguous) tensor: use .reshape")
SHAPE_HINT = ("'shape ... is invalid for input of size' means the lengths do not multiply to the dimension: check "
              "every dimension (a given length must divide it, a fully given group must equal it) and raise "
              "einops.EinopsError")
VALID_RAISED_HINT = ("einops returns a result for this input, but your function raised einops.EinopsError: one of "
                     "your checks refuses something einops accepts; compare the input with the rules in the statement")
LIBRARY_ERROR_HINT = ("this EinopsError is tensorcraft's (tc.EinopsError), not einops': either your function raised "
                      "it (raise einops.EinopsError: `from einops import EinopsError`), or the library could not "
                      "use what your function returned (compare it with the exercise's example)")
RECURSION_HINT = ("your function ends up calling itself: while a check runs, tc.substitute makes tensorcraft call "
                  "YOUR function, so calling tensorcraft's rearrange, reduce, repeat, layers or stages from inside "
                  "it goes round in circles; write it with torch and Python operations")
DETACHED_HINT = ("the result must stay connected to the input for autograd, as einops' is (a Rearrange layer sits "
                 "inside models that train): build it from x with torch operations (reshape, permute); "
                 "torch.tensor(...), .tolist(), .numpy() and .detach() cut the gradient")
FLOAT_LENGTH_HINT = ("a length must be an int: divide with // (floor division); / gives a float even when the "
                     "division is exact")
FORBIDDEN_HINT = ("your code reached a function that does the exercise for you (named in the message above; "
                  "the statement lists what is forbidden): write this step yourself with torch and Python")
EMPTY_SHAPE_HINT = ("x.reshape(*shape) with an empty shape calls reshape() with no shape at all (a scalar's shape "
                    "is ()): pass the shape as one list or tuple, x.reshape(shape)")


class DetachedResult(Exception):
    """Raised by the autograd route when the learner's result does not require grad."""


# What einops' rule is behind an error case, found from the case's note (first match wins).
RAISE_RULES = (
    ("number 0", "a number is an anonymous axis of that length, and a length must be positive: '0' raises"),
    ("number other than 1", "rearrange accepts no number other than 1, on either side (a number adds an axis "
     "in repeat and removes one in reduce): check both sides"),
    ("inside a group on the left", "'...' may stand inside a group only on the right (to merge the dimensions "
     "it stands for); on the left einops refuses '(h ...)'"),
    ("twice", "a name may appear only once on each side, inside a group too: remember every name you have "
     "seen and raise at the second one"),
    ("two ellipses", "'...' may appear only once on each side, inside a group too"),
    ("only", "rearrange keeps every axis: the same names on both sides, and '...' on both sides or on neither"),
    ("missing on the right", "rearrange keeps every axis: the same names on both sides"),
    ("nested", "groups are one level deep: '(' inside an open group raises"),
    ("never closed", "every '(' needs its ')': a group still open at the end of the text raises"),
    ("without '('", "a ')' with no open group raises"),
    ("_", "a name is a Python identifier (str.isidentifier) that neither starts nor ends with '_'"),
    ("identifier", "a name is a Python identifier (str.isidentifier): '2a' is not one"),
    ("character", "words are separated by spaces and parentheses only; any character other than letters, "
     "digits, '_', '.', '(', ')' and ' ' (a tab too) raises"),
    ("names no axis", "every keyword length must name an axis of the pattern"),
    ("dimension, the pattern", "the input's number of dimensions must match the left side (with '...', be at "
     "least the number of the other dimensions)"),
    ("dimensions, the pattern", "the input's number of dimensions must match the left side (with '...', be at "
     "least the number of the other dimensions)"),
    ("unknown lengths", "one dimension can tell one unknown length, not two: with two unknown axes in a group "
     "(and no keyword length for one of them) raise"),
    ("1 on the left", "a 1 or () on the left is a dimension of length 1: check that the input's dimension is 1"),
)
LENGTH_RULE = ("check every dimension: a given length must divide it (or, with every length given, the product "
               "must equal it), also for a single axis whose length was given as a keyword")


def _rule(note: str) -> str:
    return next((rule for key, rule in RAISE_RULES if key in note), LENGTH_RULE)


class RearrangeExercise(Exercise):
    """An Exercise whose failures name the rule behind an error case that einops raises on (which the
    generic runner can only answer with the exercise's hint), and a few torch errors by their message."""

    def _run_group(self, learner_fn: Callable[..., Any], group: Group, device: str,
                   passed: list | None = None) -> GroupOutcome:
        outcome = super()._run_group(learner_fn, group, device, passed)
        if outcome.status == FAIL and outcome.hint not in {m.hint for m in mutants_for(self.id)}:
            # a known mistake's hint names it; only an unexplained failure gets the case's rule
            outcome.hint = _specific_hint(group, outcome) or outcome.hint
        return outcome


def _specific_hint(group: Group, outcome: GroupOutcome) -> str | None:
    number, detail = outcome.case, outcome.detail
    case = group.cases[number - 1] if 0 < number <= len(group.cases) else None
    if case is not None and case.raises is not None:
        if outcome.reason == NO_ERROR:
            return f"einops raises EinopsError here ({case.note}): {_rule(case.note)}"
        if outcome.reason == WRONG_ERROR:
            name = outcome.error
            raised = "tensorcraft's EinopsError (tc.EinopsError)" if name == ERROR.__name__ else name
            return (f"raise einops.EinopsError (`from einops import EinopsError`), not {raised}, as einops does "
                    f"here ({case.note}): {_rule(case.note)}")
    if "asks you to do without" in detail:  # a tripwire's error, caught and re-raised by the learner's code
        return FORBIDDEN_HINT
    if "raised RuntimeError" in detail and "view size is not compatible" in detail:
        return VIEW_HINT
    if "raised RuntimeError" in detail and "is invalid for input of size" in detail:
        return SHAPE_HINT
    if "TypeError" in detail and "reshape() missing" in detail:
        return EMPTY_SHAPE_HINT
    if "TypeError" in detail and "element of type float" in detail:
        return FLOAT_LENGTH_HINT
    return None


EXTRA_HINTS = {DetachedResult: DETACHED_HINT, ERROR: VALID_RAISED_HINT, tc.EinopsError: LIBRARY_ERROR_HINT,
               RecursionError: RECURSION_HINT, RuntimeError: RUNTIME_HINT}


# ---------------------------------------------------------------- helpers shared by the exercises


@dataclass(frozen=True)
class Anonymous:
    """An anonymous axis in a compared parse: equal only to an anonymous axis of the same length."""

    length: int

    def __repr__(self) -> str:
        return f"AnonymousAxis({self.length})"


def _token(axis: Any) -> Any:
    if isinstance(axis, AnonymousAxis):
        return Anonymous(axis.length)
    if isinstance(axis, einops.parsing.AnonymousAxis):
        return Anonymous(axis.value)
    return ELLIPSIS if axis == "…" else axis


def _ours(expression: Any) -> Any:
    """A learner's Expression as nested tuples; anything else is returned as it is (and mismatches)."""
    if not isinstance(expression, Expression):
        return expression
    return tuple(ELLIPSIS if dim == ELLIPSIS else tuple(_token(a) for a in dim) for dim in expression.dims)


def _einops_parse(text: str) -> tuple:
    return tuple(ELLIPSIS if dim == "…" else tuple(_token(a) for a in dim)
                 for dim in ParsedExpression(text).composition)


OPERATIONS = {  # how a pipeline case names the operation -> (einops, tensorcraft)
    "rearrange": (lambda x, p, n: einops.rearrange(x, p, **n), lambda x, p, n: tc_rearrange(x, p, **n)),
    "repeat": (lambda x, p, n: einops.repeat(x, p, **n), lambda x, p, n: tc_repeat(x, p, **n)),
    "max": (lambda x, p, n: einops.reduce(x, p, "max", **n), lambda x, p, n: tc_reduce(x, p, "max", **n)),
}


def _with_gradient(fn: Callable, x: torch.Tensor) -> tuple:
    """``fn(x)`` on an ``x`` that requires grad: the result, and x.grad after a backward pass with distinct weights."""
    x = x.detach().clone().requires_grad_(True)
    y = fn(x)
    if not isinstance(y, torch.Tensor) or not y.requires_grad:
        raise DetachedResult(f"the input requires grad, the result does not: got {type(y).__name__}"
                             + (f" with requires_grad={y.requires_grad}" if isinstance(y, torch.Tensor) else ""))
    weights = torch.arange(y.numel(), dtype=y.dtype, device=y.device).reshape(y.shape)
    (y * weights).sum().backward()
    return y.detach(), x.grad


def _run_rearrange(rearrange: Callable, x: torch.Tensor, pattern: str, lengths: dict, *route: str) -> Any:
    """Call ``rearrange`` directly, with autograd, or inside nn.Sequential(Rearrange(...)) via tc.substitute."""
    if GRADIENT in route:
        return _with_gradient(lambda t: rearrange(t, pattern, **lengths), x)
    if not route:
        return rearrange(x, pattern, **lengths)
    model = torch.nn.Sequential(Rearrange(pattern, **lengths), torch.nn.Identity())
    with tc.substitute(rearrange=rearrange):
        return model(x)


def _show_rearrange(x: torch.Tensor, pattern: str, lengths: dict, *route: str) -> str:
    """A case as the learner would call it: rearrange(x, pattern, h=2), and how the check ran it."""
    call = f"rearrange({describe(x, 60)}, {pattern!r}{''.join(f', {k}={v!r}' for k, v in lengths.items())})"
    if GRADIENT in route:
        return call + ", with x.requires_grad"
    return call + (", inside nn.Sequential(Rearrange(...))" if route else "")


def _einops_rearrange(x: torch.Tensor, pattern: str, lengths: dict, *route: str) -> Any:
    if GRADIENT in route:
        return _with_gradient(lambda t: einops.rearrange(t, pattern, **lengths), x)
    return einops.rearrange(x, pattern, **lengths)


def _values(shape: tuple, g: torch.Generator | None = None, dtype=torch.float32) -> torch.Tensor:
    """Distinct values in a random order, so that any element out of place shows."""
    n = 1
    for length in shape:
        n *= length
    values = torch.randperm(n, generator=g) if g is not None else torch.arange(n)
    return values.to(dtype).reshape(shape)


def _case(pattern: str, shape: tuple, note: str, route: tuple = (), raises=None, **lengths: int) -> Case:
    return Case((_values(shape), pattern, lengths, *route), note, raises)


# ---------------------------------------------------------------- random patterns


NAMES = ("a", "b", "c", "d", "h", "w", "t", "k")


def _shuffled(g: torch.Generator, items: list) -> list:
    return [items[i] for i in torch.randperm(len(items), generator=g).tolist()]


def _grouped(g: torch.Generator, axes: list, max_group: int = 3) -> list[list[str]]:
    groups, i = [], 0
    while i < len(axes):
        size = min(len(axes) - i, 1 if draw(g, 0, 3) == 0 else draw(g, 1, max_group + 1))
        groups.append(axes[i:i + size])
        i += size
    return groups


def _side(groups: list) -> str:
    return " ".join(group if group == "..." else group[0] if len(group) == 1 else f"({' '.join(group)})"
                    for group in groups)


def random_rearrange(g: torch.Generator, ellipsis: bool = False) -> tuple[str, tuple, dict]:
    """A valid pattern with compositions on both sides, the lengths it needs, and an input shape."""
    names = _shuffled(g, list(NAMES))[:draw(g, 2, 6)]
    length = {name: draw(g, 1, 5) if draw(g, 0, 5) == 0 else draw(g, 2, 5) for name in names}
    left = _grouped(g, _shuffled(g, names))
    right = _grouped(g, _shuffled(g, names))
    given: dict[str, int] = {}
    for group in left:
        if len(group) > 1:
            keep_unknown = draw(g, 0, len(group))
            for i, name in enumerate(group):
                if i != keep_unknown or draw(g, 0, 4) == 0:
                    given[name] = length[name]
        elif draw(g, 0, 6) == 0:
            given[group[0]] = length[group[0]]
    shape = []
    for group in left:
        size = 1
        for name in group:
            size *= length[name]
        shape.append(size)
    if ellipsis:
        at_left, at_right = draw(g, 0, len(left) + 1), draw(g, 0, len(right) + 1)
        left.insert(at_left, "...")
        groups = [group for group in right if len(group) > 1]
        if groups and draw(g, 0, 3) == 0:  # inside an output group, which merges its dimensions
            group = groups[draw(g, 0, len(groups))]
            group.insert(draw(g, 0, len(group) + 1), "...")
        else:
            right.insert(at_right, "...")
        shape[at_left:at_left] = [draw(g, 2, 4) for _ in range(draw(g, 0, 4))]
    given = {name: given[name] for name in sorted(given)}
    return f"{_side(left)} -> {_side(right)}", tuple(shape), given


def random_shape_error(g: torch.Generator, kind: int) -> tuple[str, tuple, dict, str]:
    """A pattern whose lengths do not fit the input (kind 0-3: a length that does not divide, a wrong
    product of given lengths, a wrong given length, two given lengths whose product does not divide),
    with random names and lengths."""
    kind %= 4
    a, b, c = _shuffled(g, list(NAMES))[:3]
    la, lb, lc = draw(g, 2, 5), draw(g, 2, 5), draw(g, 2, 4)
    if kind == 0:
        return f"({a} {b}) {c} -> {a} {c} {b}", (la * lb + 1, lc), {a: la}, f"{la} does not divide {la * lb + 1}"
    if kind == 1:
        return f"{a} ({b} {c}) -> ({c} {a}) {b}", (la, lb * lc + lb), {b: lb, c: lc}, "both lengths given, wrong product"
    if kind == 3:
        return (f"({a} {b} {c}) -> {c} {b} {a}", (la * lb * lc + 1,), {a: la, b: lb},
                f"{la * lb} does not divide {la * lb * lc + 1}")
    return f"{a} {b} -> {b} {a}", (la, lb), {a: la + 1}, f"{a}={la + 1} given, the dimension is {la}"


def random_rank_error(g: torch.Generator, kind: int) -> tuple[str, tuple, dict, str]:
    """An error that einops finds in the pattern or the rank, before any length (kind 0-8)."""
    kind %= 9
    a, b, c = _shuffled(g, list(NAMES))[:3]
    if kind == 5:
        n = draw(g, 2, 4)
        return f"({a} {n}) {b} -> {a} {b}", (2 * n, 3), {}, "a number other than 1 on the left"
    if kind == 6:
        return f"({a} ...) {b} -> {a} ... {b}", (4, 3), {a: 2}, "... inside a group on the left"
    if kind == 7:
        return f"{a} {b} -> {b} ... {a}", (2, 3), {}, "... on the right only"
    if kind == 8:
        return f"{a} {b} ... -> ... {b} {a}", (4,), {}, "the input has 1 dimension, the pattern at least 2"
    if kind == 4:
        return f"{a} {b} -> {b} {a}", (2, 3), {c: 2}, f"{c}=2 names no axis of the pattern"
    if kind == 0:
        return f"{a} {b} {c} -> {c} {b} {a}", (2, 3), {}, "the input has 2 dimensions, the pattern 3"
    if kind == 1:
        return f"{a} {b} -> {a}", (2, 3), {}, f"{b} is missing on the right"
    if kind == 2:
        return f"({a} {b}) -> {a} {b}", (6,), {}, "two unknown lengths in one group"
    return f"{a} {b} -> {a} {a} {b}", (2, 3), {}, f"{a} twice on the right"


# ---------------------------------------------------------------- exercise 1: parse one side


def _parse_reference(*args: Any) -> Any:
    if len(args) == 1:
        return _einops_parse(args[0])
    x, pattern, lengths, operation = args
    return OPERATIONS[operation][0](x, pattern, lengths)


def _parse_call(parse_expression: Callable, *args: Any) -> Any:
    """One side alone: compare the parse; a whole pattern: run tensorcraft with the parser substituted."""
    if len(args) == 1:
        return _ours(parse_expression(args[0]))
    x, pattern, lengths, operation = args
    with tc.substitute(parse_expression=parse_expression):
        return OPERATIONS[operation][1](x, pattern, lengths)


def _side_case(text: str, note: str = "", raises=None) -> Case:
    return Case((text,), note or repr(text), raises)


def _pipeline_case(pattern: str, shape: tuple, operation: str, note: str, **lengths: int) -> Case:
    return Case((_values(shape), pattern, lengths, operation), note)


def _parse_public() -> list[Group]:
    return [
        Group("names and groups", [_side_case("b c h w"), _side_case("b (h w) c"),
                                   _side_case("(b1 b2) h w c"), _side_case("  a   (b  c)  ", "extra spaces"),
                                   _side_case("a(b c)(d)", "no spaces around parentheses"),
                                   _side_case("", "no dimension at all: a scalar")]),
        Group("unit dimensions: 1 and ()", [_side_case("b 1 c"), _side_case("(h w) ()", "an empty group after a group"),
                                            _side_case("b () c"),
                                            _side_case("(h 1 w)", "a 1 inside a group changes nothing")]),
        Group("numbers are anonymous axes", [_side_case("(h 2) (w 3)"), _side_case("b 5")]),
        Group("the ellipsis", [_side_case("b ... c"), _side_case("..."), _side_case("(h ...) c", "inside a group"),
                               _side_case("a (...)", "a group of the ellipsis alone")]),
        Group("mistakes raise einops.EinopsError", [
            _side_case("a b a", "a name twice", ERROR), _side_case("a (b a)", "a name twice, once in a group", ERROR),
            _side_case("... a ...", "two ellipses", ERROR),
            _side_case("(a (b c))", "nested parentheses", ERROR), _side_case("(a b", "'(' never closed", ERROR),
            _side_case("a b)", "')' without '('", ERROR), _side_case("_a b", "a name starting with _", ERROR),
            _side_case("a-b", "a character that is not allowed", ERROR),
            _side_case("(h 0)", "a number 0", ERROR), _side_case("2a b", "a name that is not an identifier", ERROR),
            _side_case("a\tb", "a tab: a character that is not allowed", ERROR)]),
        Group("inside tc.rearrange / tc.repeat / tc.reduce, via tensorcraft.substitute", [
            _pipeline_case("b (h w) c -> b c h w", (2, 6, 3), "rearrange", "decompose", h=2),
            _pipeline_case("b ... c -> b c ...", (2, 3, 4, 2), "rearrange", "ellipsis"),
            _pipeline_case("h w -> h (w 2) 1", (2, 3), "repeat", "a number on the right"),
            _pipeline_case("b (h 2) (w 2) -> b h w", (2, 4, 6), "max", "max pooling")]),
    ]


def _random_side(g: torch.Generator) -> str:
    names = _shuffled(g, list(NAMES))[:draw(g, 1, 6)]
    words: list = list(names) + [str(draw(g, 2, 6)) for _ in range(draw(g, 0, 3))] + ["1"] * draw(g, 0, 2)
    if draw(g, 0, 2):
        words.append("...")
    groups = _grouped(g, _shuffled(g, words))
    if draw(g, 0, 2) == 0:
        groups.insert(draw(g, 0, len(groups) + 1), [])
    parts = []
    for group in groups:
        if len(group) == 1 and draw(g, 0, 4):
            parts.append(group[0])
        else:
            parts.append("(" + " ".join(group) + ")")
    text = parts[0]
    for part in parts[1:]:  # a parenthesis ends a word by itself: sometimes no space next to it
        bracketed = text.endswith(")") or part.startswith("(")
        text += ("" if bracketed and draw(g, 0, 3) == 0 else " " * draw(g, 1, 3)) + part
    return text


def _random_bad_side(g: torch.Generator, kind: int) -> tuple[str, str]:
    a, b, c = _shuffled(g, list(NAMES))[:3]
    return [(f"{a} ({b} {a})", "a name twice"), (f"... {a} ({b} ...)", "two ellipses"),
            (f"{a} ({b} ({c}))", "nested parentheses"), (f"({a} {b} {c}", "'(' never closed"),
            (f"{a} {b}) {c}", "')' without '('"), (f"{a} {b}_ {c}", "a name ending with _"),
            (f"{a} ({b} 0)", "a number 0"), (f"{a} {draw(g, 2, 10)}{b}", "a name that is not an identifier"),
            (f"{a}\t{b}", "a tab: a character that is not allowed")][kind]


def _parse_hidden(g: torch.Generator) -> list[Group]:
    sides = [_side_case(_random_side(g)) for _ in range(10)]
    errors = [_side_case(text, note, ERROR) for text, note in (_random_bad_side(g, kind) for kind in range(9))]
    pipeline = []
    for i in range(6):
        pattern, shape, lengths = random_rearrange(g, ellipsis=i % 2 == 1)
        pipeline.append(Case((_values(shape, g), pattern, lengths, "rearrange"), pattern))
    return [Group("random sides", sides), Group("random mistakes raise einops.EinopsError", errors),
            Group("random patterns inside tc.rearrange, via tensorcraft.substitute", pipeline)]


PARSE_EXPRESSION = RearrangeExercise(
    id="nb05_rearrange.parse_expression",
    reference=_parse_reference,
    public=_parse_public,
    hidden=_parse_hidden,
    hint="walk the text one character at a time: a space or a parenthesis ends a word; '(' opens a group, "
         "')' closes it and appends it as one dimension; a word outside a group is a dimension of its own",
    forbidden=FORBIDDEN,
    call=_parse_call,
    extra_hints=EXTRA_HINTS,
)


def check_parse_expression(parse_expression, hidden: bool = False) -> None:
    """Check ``parse_expression(text) -> Expression`` against einops' parser and inside tc's pipeline."""
    PARSE_EXPRESSION.check(parse_expression, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: the plan


def _plan_call(make_plan: Callable, x: torch.Tensor, pattern: str, lengths: dict, *route: str) -> Any:
    """tc.rearrange (or the Rearrange layer) with the learner's make_plan substituted."""
    with tc.substitute(make_plan=make_plan):
        if route:
            return torch.nn.Sequential(Rearrange(pattern, **lengths))(x)
        return tc_rearrange(x, pattern, **lengths)


VALID_CASES = [  # (pattern, shape, note, lengths), shared by make_plan and rearrange
    ("b c h w -> b h w c", (2, 3, 4, 2), "permute", {}),
    ("b c h w -> b (c h w)", (2, 3, 2, 2), "flatten", {}),
    ("h w c -> (w h) c", (2, 3, 2), "compose on the right: (w h)", {}),
    ("b (h w) c -> b h w c", (2, 12, 3), "decompose (h w) with h=3", {"h": 3}),
    ("b (h w) c -> b h w c", (2, 12, 3), "decompose (h w) with w=3", {"w": 3}),
    ("(b1 b2) h w c -> (b1 h) (b2 w) c", (6, 2, 3, 1), "a mosaic", {"b1": 2}),
    ("b c (h h2) (w w2) -> b (c h2 w2) h w", (1, 2, 4, 6), "space to depth", {"h2": 2, "w2": 2}),
    ("(h w) c -> h c w", (6, 2), "a group split to both sides of another axis", {"h": 2}),
    ("a b -> b a", (2, 3), "a given length of a plain axis", {"a": 2}),
]
ELLIPSIS_CASES = [
    ("b ... c -> b c ...", (2, 3, 4, 2), "... stands for 2 dimensions", {}),
    ("... h w -> ... w h", (2, 3), "... stands for none", {}),
    ("(a b) ... -> ... b a", (6, 2, 3), "... in the middle of the output", {"a": 2}),
    ("b ... -> (b ...)", (2, 3, 2), "... composed on the right", {}),
    ("b ... -> (... b)", (3, 2, 2), "... first inside an output group", {}),
    ("b ... -> b (...)", (3,), "(...) of no dimension has length 1", {}),
]
UNIT_CASES = [
    ("b 1 c -> b c", (2, 1, 3), "a 1 on the left", {}),
    ("b c -> b () c 1", (2, 3), "() and 1 on the right", {}),
    (" -> ", (), "a scalar, nothing on either side", {}),
    ("-> 1 ()", (), "a scalar gains two unit dimensions", {}),
    ("1 () -> ", (1, 1), "two unit dimensions removed: a scalar", {}),
]
SHAPE_ERRORS = [
    ("(h w) c -> h w c", (7, 2), "h=2 does not divide 7", {"h": 2}),
    ("a (b c) -> a b c", (2, 7), "b=2, c=3 make 6, the dimension is 7", {"b": 2, "c": 3}),
    ("a b -> b a", (2, 3), "a=3 given, the dimension is 2", {"a": 3}),
    ("(h w c) -> c w h", (10,), "h=2, w=2 make 4, which does not divide 10", {"h": 2, "w": 2}),
    ("1 b -> b", (5, 2), "a 1 on the left, the dimension is 5", {}),
]
PATTERN_ERRORS = [
    ("a b -> a", (2, 3), "b on the left only", {}),
    ("a b c -> c b a", (2, 3), "the input has 2 dimensions, the pattern 3", {}),
    ("(h w) -> h w", (6,), "two unknown lengths in one group", {}),
    ("a b -> (a b) 2", (2, 3), "a number other than 1", {}),
    ("(h 2) c -> h c", (4, 2), "a number other than 1 on the left", {}),
    ("(h ...) c -> h ... c", (4, 2), "... inside a group on the left", {"h": 2}),
    ("a b -> a b ...", (2, 3), "... on the right only", {}),
    ("a b ... -> ... b a", (4,), "the input has 1 dimension, the pattern at least 2", {}),
    ("a b -> a a b", (2, 3), "a twice on the right", {}),
    ("a b -> b a", (2, 3), "c=2 names no axis of the pattern", {"c": 2}),
]


def _cases(rows: list, route: tuple = (), raises=None) -> list[Case]:
    return [_case(pattern, shape, note, route, raises, **lengths) for pattern, shape, note, lengths in rows]


def _plan_public() -> list[Group]:
    return [
        Group("permute, flatten, compose, decompose", _cases(VALID_CASES)),
        Group("the ellipsis", _cases(ELLIPSIS_CASES)),
        Group("unit dimensions and scalars", _cases(UNIT_CASES)),
        Group(f"{LAYER}, via tensorcraft.substitute", _cases(VALID_CASES[3:7], (LAYER,))),
        Group("lengths that do not fit raise einops.EinopsError", _cases(SHAPE_ERRORS, raises=ERROR)),
    ]


def _random_valid(g: torch.Generator, n: int, route: tuple = ()) -> list[Case]:
    cases = []
    for i in range(n):
        pattern, shape, lengths = random_rearrange(g, ellipsis=i % 2 == 1)
        dtype = torch.int64 if i % 4 == 3 else torch.float32
        cases.append(Case((_values(shape, g, dtype), pattern, lengths, *route), pattern))
    return cases


def _error_cases(g: torch.Generator, n: int, draw: Callable) -> list[Case]:
    cases = []
    for kind in range(n):  # every kind of error at least once
        pattern, shape, lengths, note = draw(g, kind)
        cases.append(Case((_values(shape, g), pattern, lengths), note, ERROR))
    return cases


def _plan_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random patterns", _random_valid(g, 10)),
            Group(f"random patterns {LAYER}", _random_valid(g, 3, (LAYER,))),
            Group("random lengths that do not fit", _error_cases(g, 5, random_shape_error))]


MAKE_PLAN = RearrangeExercise(
    id="nb05_rearrange.make_plan",
    reference=_einops_rearrange,
    public=_plan_public,
    hidden=_plan_hidden,
    hint="lengths[axis] for every elementary axis: the given ones from recipe.given_axes first; then per input "
         "dimension, the one unknown axis is the dimension's length divided by the product of the others (raise "
         "einops.EinopsError unless it divides), and a dimension with no unknown axis must equal the product of "
         "its lengths (raise otherwise, also for a plain axis whose length was given). init_shape lists every "
         "axis length, final_shape multiplies the lengths in each output group",
    forbidden=FORBIDDEN,
    call=_plan_call,
    extra_hints=EXTRA_HINTS,
)


def check_make_plan(make_plan, hidden: bool = False) -> None:
    """Check ``make_plan(recipe, shape, axes_lengths) -> Plan`` inside tc.rearrange, against einops."""
    MAKE_PLAN.check(make_plan, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: rearrange


def _rearrange_public() -> list[Group]:
    """The plan's cases, and the errors that the recipe finds in the pattern (the plan never sees those)."""
    return _plan_public() + [
        Group("patterns that cannot apply raise einops.EinopsError", _cases(PATTERN_ERRORS, raises=ERROR)),
        Group("with autograd: the result and the input's gradient", _cases(VALID_CASES[5:8], (GRADIENT,)))]


def _rearrange_hidden(g: torch.Generator) -> list[Group]:
    return _plan_hidden(g) + [
        Group("random patterns that cannot apply", _error_cases(g, 9, random_rank_error)),
        Group("random patterns with autograd", [Case(case.args + (GRADIENT,), case.note)
                                                for case in _random_valid(g, 2)])]


REARRANGE = RearrangeExercise(
    id="nb05_rearrange.rearrange",
    reference=_einops_rearrange,
    public=_rearrange_public,
    hidden=_rearrange_hidden,
    hint="three steps: reshape the input so that every axis is a dimension of its own (decompose), permute "
         "those axes into the order the right side lists them, reshape to merge each right-side group (compose)",
    forbidden=FORBIDDEN_IN_REARRANGE,
    numpy_allowed=False,  # a numpy round trip loses autograd, device and the lesson
    call=_run_rearrange,
    show=_show_rearrange,
    parts=("the result", "x.grad after (result * weights).sum().backward()"),
    extra_hints=EXTRA_HINTS,
)


def check_rearrange(rearrange, hidden: bool = False) -> None:
    """Check ``rearrange(x, pattern, **axes_lengths)`` against einops, directly and inside the Rearrange layer."""
    REARRANGE.check(rearrange, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (PARSE_EXPRESSION, MAKE_PLAN, REARRANGE)}
