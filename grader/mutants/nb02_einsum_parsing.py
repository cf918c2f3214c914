"""Known-wrong answers to notebook 02's exercises (how einsum reads an equation), each with its hint.

A mistake in a rule the library implements is a patch of the library's own source
(``grader.mutants.patched``): ``infer_output`` for the implicit output, ``parse_equation`` (the parser
and ``bind``) for validating an equation and for the letters' sizes. The library stays the one copy
of the right answers; a mutant holds only its mistake.
"""
import opt_einsum
import torch

import tensorcraft.einstein
from tensorcraft import stages
from tensorcraft.einstein.infer import infer_output
from tensorcraft.einstein.parse import _broadcast, _output_labels, _parse_term, bind, parse_equation, parse_terms

from . import mutant, patched

INFER = "nb02_einsum_parsing.infer_output"
VALIDATE = "nb02_einsum_parsing.validate_equation"
SIZES = "nb02_einsum_parsing.label_sizes"
KEEP_ELLIPSIS_HINT = ("when any operand has '...' (the first or a later one), its dimensions stay in the output: "
                      "start the output with '...' ('ij,...jk' gives '...ik')")
EVERY_LETTER_HINT = ("a letter used more than once in the whole input side is summed away, also one used once in "
                     "each of two operands: keep only the letters used exactly once in all (in 'ij,jk', j is used "
                     "twice, so the output is 'ik')")

# ---------------------------------------------------------------- infer_output

ONCE = "sorted(c for c, n in counts.items() if n == 1)"
ELLIPSIS_FIRST = '(ELLIPSIS if any(ELLIPSIS in term for term in terms) else "")'

patched(INFER, "infer_output_order_of_appearance", infer_output, (ONCE, "(c for c, n in counts.items() if n == 1)"),
        hint="torch does not keep the letters in their order of appearance: "
        "it sorts them by code point, so 'ijd,jk' gives 'dik', not 'idk'")

patched(INFER, "infer_output_lowercase_first", infer_output,
        (ONCE, "sorted((c for c, n in counts.items() if n == 1), key=lambda c: (c.isupper(), c))"),
        hint="sort by code point: every uppercase letter comes before every "
        "lowercase one ('Ab' gives 'Ab' and 'aB' gives 'Ba'); you put lowercase letters first")

patched(INFER, "infer_output_case_insensitive", infer_output,
        (ONCE, "sorted((c for c, n in counts.items() if n == 1), key=lambda c: (c.lower(), c))"),
        hint="sorting without regard to case is not code-point order: "
        "'Z' (code point 90) comes before 'a' (97), so 'aZ' gives 'Za'; use plain sorted()")

patched(INFER, "infer_output_ellipsis_last", infer_output,
        (f"return {ELLIPSIS_FIRST} + once", f"return once + {ELLIPSIS_FIRST}"),
        hint="the ellipsis dimensions come first in an implicit output: "
        "'...ij,...jk' gives '...ik', not 'ik...'")

patched(INFER, "infer_output_drops_ellipsis", infer_output, (f"return {ELLIPSIS_FIRST} + once", "return once"),
        hint=KEEP_ELLIPSIS_HINT)

patched(INFER, "infer_output_ellipsis_from_first_operand", infer_output,
        ("any(ELLIPSIS in term for term in terms)", "ELLIPSIS in terms[0]"), hint=KEEP_ELLIPSIS_HINT)

patched(INFER, "infer_output_keeps_every_letter", infer_output, ("if n == 1", "if n >= 1"), hint=EVERY_LETTER_HINT)

patched(INFER, "infer_output_counts_commas", infer_output,
        ('Counter(c for term in terms for c in term.replace(ELLIPSIS, ""))', 'Counter(inputs.replace(ELLIPSIS, ""))'),
        hint="commas separate the operands' terms; they are not subscripts: "
        "remove them (and '...') before counting letters")

patched(INFER, "infer_output_descending", infer_output,
        (ONCE, "sorted((c for c, n in counts.items() if n == 1), reverse=True)"),
        hint="sort in ascending code-point order, as sorted() does without "
        "reverse=True: 'ij,jk' gives 'ik'")

patched(INFER, "infer_output_counts_per_operand", infer_output,   # j in 'ij,jk': once per operand, twice in all
        (ONCE, 'sorted({c for term in terms for c, n in Counter(term.replace(ELLIPSIS, "")).items() if n == 1})'),
        hint=EVERY_LETTER_HINT)

patched(INFER, "infer_output_counts_operands", infer_output,
        ('for c in term.replace(ELLIPSIS, ""))', 'for c in set(term.replace(ELLIPSIS, "")))'),
        hint="a letter written twice inside one operand counts twice: 'ii' "
        "gives '' (the trace, a scalar), not 'i'; count letters, not the operands they appear in")

patched(INFER, "infer_output_odd_counts", infer_output, ("if n == 1", "if n % 2 == 1"),
        hint="a letter that appears three times is summed too: keep only "
        "the letters used exactly once ('ab,ab,ab' gives '')")

# A right answer in the wrong type (a list of the letters) is no mutant: it would be the answer, one
# ''.join away; compare.kind_hint names that mistake.


# ---------------------------------------------------------------- validate_equation


def _as_validator(parse, equation, ndims):
    """validate_equation(equation, ndims) by parsing against shapes of those ranks: None, or ValueError."""
    parse(equation, [(2,) * n for n in ndims])


def _validating(name, *edits, hint):
    patched(VALIDATE, name, parse_equation, *edits, hint=hint, adapt=_as_validator)


_validating("validate_strips_spaces", (parse_terms, "equation.partition(ARROW)", 'equation.replace(" ", "").partition(ARROW)'),
            hint="spaces may separate subscripts, but they may not split "
            "'->' or '...': torch rejects 'ij- >ji' and '. ..ij' (the claim that spaces can go anywhere is wrong); "
            "do not remove all spaces before reading the equation")

_validating("validate_any_output_letter", (_output_labels, "if char not in used:", "if False:"),
            hint="every letter after '->' must appear in an input: torch rejects 'm,d->nd' (n is in no input)")

_validating("validate_repeated_output", (_output_labels, "if repeated:", "if False:"),
            hint="a letter may appear at most once after '->': torch rejects 'ij->ii'")

_validating("validate_any_operand_count", (bind, "if len(terms) != len(shapes):", "if False:"),
            hint="the number of comma-separated terms must equal the "
            "number of operands: 'ij,jk' with one operand is an error, and so is 'ij' with two")

_validating("validate_ellipsis_any_rank", (bind, "if term.ellipsis_at is not None and named > len(shape):", "if False:"),
            hint="with '...' an operand needs at least as many dimensions "
            "as it has letters (the ellipsis covers the rest, possibly none): 'ijk...' with 2 dimensions is an error")

_validating("validate_rejects_spaces", (_parse_term, 'if char == " ":', "if False:"),
            hint="spaces are allowed between subscripts: 'i j , j k -> i k' is valid")

_validating("validate_any_whitespace", (_parse_term, 'if char == " ":', r'if char in " \t\n\r":'),
            hint="only the space character may separate subscripts: a tab "
            "or a newline is an invalid subscript for torch")

_validating("validate_two_ellipses", (_parse_term, "if ellipsis_at is not None:", "if False:"),
            hint="each term may hold at most one '...': 'i...j...' is an error")

_validating("validate_loose_dots",
            (_parse_term, 'elif char == ".":', 'elif char == "." and text[i : i + 3] != ELLIPSIS:\n'
             '            ellipsis_at = len(letters) if ellipsis_at is None else ellipsis_at\n'
             '            i += 1\n'
             '        elif char == ".":'),
            hint="'.' is only allowed as part of '...', three adjacent dots: '..ij' is an error")

_validating("validate_unicode_letters", (_parse_term, "elif char in LETTERS:", "elif char.isalpha():"),
            hint="only a-z and A-Z are subscripts: 'é'.isalpha() is True "
            "in Python, but torch rejects it; test char.isascii() and char.isalpha()")

_validating("validate_output_characters_unchecked",
            (parse_terms, "_parse_term(rhs,", '_parse_term("".join(c for c in rhs if c.isascii() and c.isalpha() or c in " ."),'),
            hint="the output follows the same character rules as the inputs: "
            "in 'ij->ij->i' the output 'ij->i' holds '-' and '>' (a second arrow), which torch rejects")


@mutant(VALIDATE, hint="return None when torch accepts the equation and raise "
        "ValueError when it rejects it; True and False are neither")
def validate_returns_a_bool(equation, ndims):
    return True


_KEPT_STAGE = {"infer_output": tensorcraft.einstein.infer_output}  # kept before the check ran


@mutant("nb02_einsum_parsing.infer_output", hint="the library's own infer_output is forbidden under any name, even "
        "kept in a dict: count the letters yourself")
def infer_output_by_kept_stage(inputs):
    return _KEPT_STAGE["infer_output"](inputs)


@mutant("nb02_einsum_parsing.infer_output", hint="contract_path is forbidden here: its report holds the implicit "
        "output (output_subscript), the answer itself; count the letters yourself")
def infer_output_by_contract_path(inputs):
    return opt_einsum.contract_path(inputs, *[(2,) * len(t) for t in inputs.split(",")], shapes=True)[1].output_subscript


# ---------------------------------------------------------------- label_sizes


def _as_label_sizes(parse, equation, *shapes):
    """label_sizes(equation, *shapes) from the parser's bound equation."""
    return parse(equation, shapes).sizes


def _sizing(name, *edits, hint):
    patched(SIZES, name, parse_equation, *edits, hint=hint, adapt=_as_label_sizes)


_sizing("label_sizes_broadcast_by_max",
        (_broadcast, "        sizes[label] = size\n", "        sizes[label] = size if seen is None else max(size, seen)\n"),
        (_broadcast, "if size in (seen, 1):\n        return", "if size in (seen, 1):\n        sizes[label] = max(size, seen)\n        return"),
        hint="the size that is not 1 wins, even when it is 0: 'ij,jk' "
        "with shapes (2, 0) and (1, 3) gives j = 0 (an empty result), where max(0, 1) would give 1")

_sizing("label_sizes_last_wins", (_broadcast, "seen = sizes.get(label)", "seen = None"),
        hint="a size of 1 broadcasts, and the size that is not 1 wins: "
        "'ij,jk' with shapes (2, 1) and (4, 5) gives j = 4; the last operand's size is not always right")

_sizing("label_sizes_first_wins", (_broadcast, "if seen is None or seen == 1:", "if seen is None:"),
        (_broadcast, "if size in (seen, 1):", "if True:"),
        hint="a size of 1 broadcasts, and the size that is not 1 wins: "
        "'ij,jk' with shapes (2, 1) and (4, 5) gives j = 4, not the 1 seen first")

_sizing("label_sizes_no_broadcasting", (_broadcast, "if seen is None or seen == 1:", "if seen is None:"),
        (_broadcast, "if size in (seen, 1):", "if size == seen:"),
        hint="size 1 broadcasts against any size: 'ij,jk' with shapes "
        "(2, 1) and (4, 5) is valid (j = 4); raise only when two sizes differ and neither is 1")

_sizing("label_sizes_largest",
        (_broadcast, "if size in (seen, 1):\n        return", "if True:\n        sizes[label] = max(size, seen)\n        return"),
        hint="sizes other than 1 must agree: 'ij,jk' with j of sizes 3 and 4 "
        "is an error; raise ValueError instead of taking the larger")

_sizing("label_sizes_diagonal_broadcasts",
        (bind, "if label in own and own[label] != size:", "if label in own and own[label] != size and 1 not in (own[label], size):"),
        (bind, "            own[label] = size\n", "            own[label] = max(size, own.get(label, size))\n"),
        hint="a letter repeated inside one operand takes a diagonal: its "
        "sizes there must be equal, and a 1 does not broadcast (torch rejects 'ii' for shape (1, 3))")

_sizing("label_sizes_any_rank", (bind, "if term.ellipsis_at is None and named != len(shape):", "if False:"),
        hint="each operand needs exactly one dimension per letter: raise "
        "ValueError when it has more or fewer (zip stops at the shorter and hides the problem)")

_sizing("label_sizes_keeps_spaces", (_parse_term, 'if char == " ":', "if False:"),
        (_parse_term, "elif char in LETTERS:", 'elif char in LETTERS or char == " ":'),
        hint="remove the spaces before reading the letters: 'i j , j k' "
        "is 'ij,jk' (a space is no subscript and has no dimension)")

_sizing("label_sizes_output_letters_only",
        (bind, "output_labels=tuple(output_labels), sizes=sizes,",
         "output_labels=tuple(output_labels), sizes={k: v for k, v in sizes.items() if k in output_labels or implicit},"),
        hint="return every letter of the inputs, also those the output "
        "leaves out (they are summed, but they still have a size): 'ij,jk->ik' gives i, j and k")


# ---------------------------------------------------------------- routes around the rule


def _zeros(ndims):
    return [torch.zeros((2,) * n) for n in ndims]


@mutant("nb02_einsum_parsing.infer_output", hint="torch.ops.aten.einsum is torch.einsum under another name, and the "
        "check watches the operation, not the name: count the letters with collections.Counter and sort them")
def infer_output_by_aten_einsum(inputs):
    letters = sorted(set(inputs) - set(",."))
    size = {c: 2 + n for n, c in enumerate(letters)}
    terms = inputs.split(",")
    operands = [torch.zeros([size[c] for c in t if c.isalpha()] + [1] * (t.count(".") // 3)) for t in terms]
    shape = torch.ops.aten.einsum(inputs, operands).shape
    by_size = {n: c for c, n in size.items()}
    return "..." * ("..." in inputs) + "".join(by_size[n] for n in shape if n in by_size)


@mutant("nb02_einsum_parsing.validate_equation", hint="asking torch whether it accepts the equation is not a "
        "validator, under any name (torch.ops.aten.einsum too): check the rules of the statement yourself")
def validate_by_asking_aten_einsum(equation, ndims):
    try:
        torch.ops.aten.einsum(equation, _zeros(ndims))
    except RuntimeError as error:
        raise ValueError(str(error)) from None


@mutant("nb02_einsum_parsing.label_sizes", hint="torch.ops.aten.einsum is torch.einsum under another name, and the "
        "check watches the operation: read each letter's size from the shapes, as the statement says")
def label_sizes_by_aten_einsum(equation, *shapes):
    inputs = equation.split("->")[0].replace(" ", "")
    operands = [torch.zeros(s) for s in shapes]
    try:
        return {c: torch.ops.aten.einsum(f"{inputs}->{c}", operands).shape[0]
                for c in sorted({c for c in inputs if c.isalpha()})}
    except RuntimeError as error:
        raise ValueError(str(error)) from None


@mutant("nb02_einsum_parsing.infer_output", hint="the library's own infer_output is forbidden under any name, even "
        "reached through tensorcraft's registry of stages: write the rule yourself")
def infer_output_from_the_stage_registry(inputs):
    return stages._LIBRARY["infer_output"](inputs)


@mutant("nb02_einsum_parsing.label_sizes", hint="contract_path is forbidden here: its report holds every letter's "
        "length (size_dict), the answer itself; read the lengths from the shapes yourself")
def label_sizes_by_contract_path(equation, *shapes):
    return dict(opt_einsum.contract_path(equation, *shapes, shapes=True)[1].size_dict)
