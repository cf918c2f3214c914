"""Known-wrong answers to notebook 02's exercises (how einsum reads an equation), each with its hint."""
from collections import Counter

import opt_einsum
import torch

import tensorcraft.einstein
from tensorcraft import stages

from . import mutant

ELLIPSIS = "..."
KEEP_ELLIPSIS_HINT = ("when any operand has '...' (the first or a later one), its dimensions stay in the output: "
                      "start the output with '...' ('ij,...jk' gives '...ik')")
EVERY_LETTER_HINT = ("a letter used more than once in the whole input side is summed away, also one used once in "
                     "each of two operands: keep only the letters used exactly once in all (in 'ij,jk', j is used "
                     "twice, so the output is 'ik')")

# ---------------------------------------------------------------- infer_output


def _once(inputs: str) -> list[str]:
    counts = Counter(inputs.replace(ELLIPSIS, "").replace(",", ""))
    return [c for c, n in counts.items() if n == 1]   # in order of first appearance


def _with_ellipsis(inputs: str, letters: str) -> str:
    return (ELLIPSIS if ELLIPSIS in inputs else "") + letters


@mutant("nb02_einsum_parsing.infer_output", hint="torch does not keep the letters in their order of appearance: "
        "it sorts them by code point, so 'ijd,jk' gives 'dik', not 'idk'")
def infer_output_order_of_appearance(inputs):
    return _with_ellipsis(inputs, "".join(_once(inputs)))


@mutant("nb02_einsum_parsing.infer_output", hint="sort by code point: every uppercase letter comes before every "
        "lowercase one ('Ab' gives 'Ab' and 'aB' gives 'Ba'); you put lowercase letters first")
def infer_output_lowercase_first(inputs):
    return _with_ellipsis(inputs, "".join(sorted(_once(inputs), key=lambda c: (c.isupper(), c))))


@mutant("nb02_einsum_parsing.infer_output", hint="sorting without regard to case is not code-point order: "
        "'Z' (code point 90) comes before 'a' (97), so 'aZ' gives 'Za'; use plain sorted()")
def infer_output_case_insensitive(inputs):
    return _with_ellipsis(inputs, "".join(sorted(_once(inputs), key=lambda c: (c.lower(), c))))


@mutant("nb02_einsum_parsing.infer_output", hint="the ellipsis dimensions come first in an implicit output: "
        "'...ij,...jk' gives '...ik', not 'ik...'")
def infer_output_ellipsis_last(inputs):
    return "".join(sorted(_once(inputs))) + (ELLIPSIS if ELLIPSIS in inputs else "")


@mutant("nb02_einsum_parsing.infer_output", hint=KEEP_ELLIPSIS_HINT)
def infer_output_drops_ellipsis(inputs):
    return "".join(sorted(_once(inputs)))


@mutant("nb02_einsum_parsing.infer_output", hint=KEEP_ELLIPSIS_HINT)
def infer_output_ellipsis_from_first_operand(inputs):
    return (ELLIPSIS if ELLIPSIS in inputs.split(",")[0] else "") + "".join(sorted(_once(inputs)))


@mutant("nb02_einsum_parsing.infer_output", hint=EVERY_LETTER_HINT)
def infer_output_keeps_every_letter(inputs):
    return _with_ellipsis(inputs, "".join(sorted(set(inputs.replace(ELLIPSIS, "").replace(",", "")))))


@mutant("nb02_einsum_parsing.infer_output", hint="commas separate the operands' terms; they are not subscripts: "
        "remove them (and '...') before counting letters")
def infer_output_counts_commas(inputs):
    counts = Counter(inputs.replace(ELLIPSIS, ""))
    return _with_ellipsis(inputs, "".join(sorted(c for c, n in counts.items() if n == 1)))


@mutant("nb02_einsum_parsing.infer_output", hint="sort in ascending code-point order, as sorted() does without "
        "reverse=True: 'ij,jk' gives 'ik'")
def infer_output_descending(inputs):
    return _with_ellipsis(inputs, "".join(sorted(_once(inputs), reverse=True)))


@mutant("nb02_einsum_parsing.infer_output", hint=EVERY_LETTER_HINT)  # j in 'ij,jk': once per operand, twice in all
def infer_output_counts_per_operand(inputs):
    keep = set()
    for term in inputs.replace(ELLIPSIS, "").split(","):
        keep |= {c for c, n in Counter(term).items() if n == 1}
    return _with_ellipsis(inputs, "".join(sorted(keep)))


@mutant("nb02_einsum_parsing.infer_output", hint="a letter written twice inside one operand counts twice: 'ii' "
        "gives '' (the trace, a scalar), not 'i'; count letters, not the operands they appear in")
def infer_output_counts_operands(inputs):
    counts = Counter(c for term in inputs.replace(ELLIPSIS, "").split(",") for c in set(term))
    return _with_ellipsis(inputs, "".join(sorted(c for c, n in counts.items() if n == 1)))


@mutant("nb02_einsum_parsing.infer_output", hint="a letter that appears three times is summed too: keep only "
        "the letters used exactly once ('ab,ab,ab' gives '')")
def infer_output_odd_counts(inputs):
    counts = Counter(inputs.replace(ELLIPSIS, "").replace(",", ""))
    return _with_ellipsis(inputs, "".join(sorted(c for c, n in counts.items() if n % 2 == 1)))


@mutant("nb02_einsum_parsing.infer_output", hint="return a string of subscripts such as '...ik', not a list "
        "of letters: join them with ''.join(...)")
def infer_output_returns_list(inputs):
    return ([ELLIPSIS] if ELLIPSIS in inputs else []) + sorted(_once(inputs))


# ---------------------------------------------------------------- validate_equation


def _read(term: str, *, space=" ", dots_ok=False, ellipses=1):
    letters, found, i = [], 0, 0
    while i < len(term):
        ch = term[i]
        if ch in space:
            i += 1
        elif ch == ".":
            if dots_ok:
                i += 1
                found = 1
                continue
            if term[i:i + 3] != ELLIPSIS:
                raise ValueError("'.' outside '...'")
            found += 1
            if found > ellipses:
                raise ValueError("a second '...'")
            i += 3
        elif ch.isascii() and ch.isalpha():
            letters.append(ch)
            i += 1
        else:
            raise ValueError(f"invalid subscript {ch!r}")
    return letters, found > 0


def _validate(equation, ndims, *, strip=False, check_output_letters=True, check_repeats=True, check_count=True,
              check_ellipsis_rank=True, **read):
    if strip:
        equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    inputs = [_read(t, **read) for t in lhs.split(",")]
    if check_count and len(inputs) != len(ndims):
        raise ValueError("operands")
    for (letters, has_ellipsis), ndim in zip(inputs, ndims):
        if has_ellipsis and check_ellipsis_rank and len(letters) > ndim:
            raise ValueError("rank")
        if not has_ellipsis and len(letters) != ndim:
            raise ValueError("rank")
    if arrow:
        out, _ = _read(rhs, **read)
        used = {c for letters, _ in inputs for c in letters}
        for c in out:
            if check_output_letters and c not in used:
                raise ValueError("unknown output letter")
            if check_repeats and out.count(c) > 1:
                raise ValueError("repeated output letter")


@mutant("nb02_einsum_parsing.validate_equation", hint="spaces may separate subscripts, but they may not split "
        "'->' or '...': torch rejects 'ij- >ji' and '. ..ij' (the claim that spaces can go anywhere is wrong); "
        "do not remove all spaces before reading the equation")
def validate_strips_spaces(equation, ndims):
    _validate(equation, ndims, strip=True)


@mutant("nb02_einsum_parsing.validate_equation", hint="every letter after '->' must appear in an input: "
        "torch rejects 'm,d->nd' (n is in no input)")
def validate_any_output_letter(equation, ndims):
    _validate(equation, ndims, check_output_letters=False)


@mutant("nb02_einsum_parsing.validate_equation", hint="a letter may appear at most once after '->': torch "
        "rejects 'ij->ii'")
def validate_repeated_output(equation, ndims):
    _validate(equation, ndims, check_repeats=False)


@mutant("nb02_einsum_parsing.validate_equation", hint="the number of comma-separated terms must equal the "
        "number of operands: 'ij,jk' with one operand is an error, and so is 'ij' with two")
def validate_any_operand_count(equation, ndims):
    _validate(equation, ndims, check_count=False)


@mutant("nb02_einsum_parsing.validate_equation", hint="with '...' an operand needs at least as many dimensions "
        "as it has letters (the ellipsis covers the rest, possibly none): 'ijk...' with 2 dimensions is an error")
def validate_ellipsis_any_rank(equation, ndims):
    _validate(equation, ndims, check_ellipsis_rank=False)


@mutant("nb02_einsum_parsing.validate_equation", hint="spaces are allowed between subscripts: "
        "'i j , j k -> i k' is valid")
def validate_rejects_spaces(equation, ndims):
    _validate(equation, ndims, space="")


@mutant("nb02_einsum_parsing.validate_equation", hint="only the space character may separate subscripts: a tab "
        "or a newline is an invalid subscript for torch")
def validate_any_whitespace(equation, ndims):
    _validate(equation, ndims, space=" \t\n\r")


@mutant("nb02_einsum_parsing.validate_equation", hint="each term may hold at most one '...': 'i...j...' is an error")
def validate_two_ellipses(equation, ndims):
    _validate(equation, ndims, ellipses=2)


@mutant("nb02_einsum_parsing.validate_equation", hint="'.' is only allowed as part of '...', three adjacent dots: "
        "'..ij' is an error")
def validate_loose_dots(equation, ndims):
    _validate(equation, ndims, dots_ok=True)




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


def _sizes(equation, shapes, *, across="broadcast", within="equal", check_dims=True):
    terms = equation.replace(" ", "").split("->")[0].split(",")
    if len(terms) != len(shapes):
        raise ValueError("operands")
    sizes = {}
    for term, shape in zip(terms, shapes):
        if check_dims and len(term) != len(shape):
            raise ValueError("dimensions")
        own = {}
        for c, s in zip(term, shape):
            if c in own and own[c] != s:
                if within == "equal" or 1 not in (own[c], s):
                    raise ValueError("diagonal")
                s = max(s, own[c])
            own[c] = s
        for c, s in own.items():
            seen = sizes.get(c)
            if across == "last":
                sizes[c] = s
            elif across == "first":
                sizes.setdefault(c, s)
            elif across == "exact":
                if seen is not None and seen != s:
                    raise ValueError("sizes")
                sizes[c] = s
            elif across == "max":
                sizes[c] = max(s, seen or 1)
            elif across == "broadcast by max":  # right for every size but 0: max(0, 1) is 1
                if seen not in (None, 1) and s not in (1, seen):
                    raise ValueError("sizes")
                sizes[c] = s if seen is None else max(s, seen)
            else:
                if seen not in (None, 1) and s not in (1, seen):
                    raise ValueError("sizes")
                sizes[c] = s if seen in (None, 1) else seen
    return sizes


@mutant("nb02_einsum_parsing.label_sizes", hint="the size that is not 1 wins, even when it is 0: 'ij,jk' "
        "with shapes (2, 0) and (1, 3) gives j = 0 (an empty result), where max(0, 1) would give 1")
def label_sizes_broadcast_by_max(equation, *shapes):
    return _sizes(equation, shapes, across="broadcast by max")


@mutant("nb02_einsum_parsing.label_sizes", hint="a size of 1 broadcasts, and the size that is not 1 wins: "
        "'ij,jk' with shapes (2, 1) and (4, 5) gives j = 4; the last operand's size is not always right")
def label_sizes_last_wins(equation, *shapes):
    return _sizes(equation, shapes, across="last")


@mutant("nb02_einsum_parsing.label_sizes", hint="a size of 1 broadcasts, and the size that is not 1 wins: "
        "'ij,jk' with shapes (2, 1) and (4, 5) gives j = 4, not the 1 seen first")
def label_sizes_first_wins(equation, *shapes):
    return _sizes(equation, shapes, across="first")


@mutant("nb02_einsum_parsing.label_sizes", hint="size 1 broadcasts against any size: 'ij,jk' with shapes "
        "(2, 1) and (4, 5) is valid (j = 4); raise only when two sizes differ and neither is 1")
def label_sizes_no_broadcasting(equation, *shapes):
    return _sizes(equation, shapes, across="exact")


@mutant("nb02_einsum_parsing.label_sizes", hint="sizes other than 1 must agree: 'ij,jk' with j of sizes 3 and 4 "
        "is an error; raise ValueError instead of taking the larger")
def label_sizes_largest(equation, *shapes):
    return _sizes(equation, shapes, across="max")


@mutant("nb02_einsum_parsing.label_sizes", hint="a letter repeated inside one operand takes a diagonal: its "
        "sizes there must be equal, and a 1 does not broadcast (torch rejects 'ii' for shape (1, 3))")
def label_sizes_diagonal_broadcasts(equation, *shapes):
    return _sizes(equation, shapes, within="broadcast")


@mutant("nb02_einsum_parsing.label_sizes", hint="each operand needs exactly one dimension per letter: raise "
        "ValueError when it has more or fewer (zip stops at the shorter and hides the problem)")
def label_sizes_any_rank(equation, *shapes):
    return _sizes(equation, shapes, check_dims=False)


@mutant("nb02_einsum_parsing.label_sizes", hint="remove the spaces before reading the letters: 'i j , j k' "
        "is 'ij,jk' (a space is no subscript and has no dimension)")
def label_sizes_keeps_spaces(equation, *shapes):
    terms = equation.split("->")[0].split(",")
    for term, shape in zip(terms, shapes):
        if len(term) != len(shape):
            raise ValueError(f"{term!r} has {len(term)} subscripts for {len(shape)} dimensions")
    return _sizes(equation, shapes)


@mutant("nb02_einsum_parsing.label_sizes", hint="return every letter of the inputs, also those the output "
        "leaves out (they are summed, but they still have a size): 'ij,jk->ik' gives i, j and k")
def label_sizes_output_letters_only(equation, *shapes):
    sizes = _sizes(equation, shapes)
    _, arrow, output = equation.replace(" ", "").partition("->")
    return {c: n for c, n in sizes.items() if c in output} if arrow else sizes


@mutant("nb02_einsum_parsing.validate_equation", hint="return None when torch accepts the equation and raise "
        "ValueError when it rejects it; True and False are neither")
def validate_returns_a_bool(equation, ndims):
    try:
        _validate(equation, ndims)
    except ValueError:
        return False
    return True


@mutant("nb02_einsum_parsing.validate_equation", hint="only a-z and A-Z are subscripts: 'é'.isalpha() is True "
        "in Python, but torch rejects it; test char.isascii() and char.isalpha()")
def validate_unicode_letters(equation, ndims):
    _validate(equation.replace("é", "e"), ndims)


@mutant("nb02_einsum_parsing.validate_equation", hint="the output follows the same character rules as the inputs: "
        "in 'ij->ij->i' the output 'ij->i' holds '-' and '>' (a second arrow), which torch rejects")
def validate_output_characters_unchecked(equation, ndims):
    lhs, arrow, rhs = equation.partition("->")
    _validate(lhs + arrow + "".join(c for c in rhs if c.isascii() and c.isalpha() or c in " ."), ndims)


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
