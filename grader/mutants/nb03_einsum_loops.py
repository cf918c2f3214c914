"""Known-wrong answers to notebook 03's exercises (einsum as loops), each with the hint its author needs."""
import itertools
import math

import numpy as np
import torch

from . import mutant, one_mistake

E = "nb03_einsum_loops.einsum_loops"
C = "nb03_einsum_loops.loop_code"
N = "nb03_einsum_loops.count_iterations"


# ---------------------------------------------------------------- helpers shared by the mutants


def _split(equation):
    inputs, output = equation.split("->")
    return inputs.split(","), output


def _size(before, size, rule):
    """A label's size after one more dimension: the size that is not 1 (``rule="broadcast"``, the
    definition's, so 0 against 1 is 0); the larger (``"max"``); the first or the last seen (``"first"``, ``"last"``)."""
    if before is None:
        return size
    if rule == "first":
        return before
    if rule == "last":
        return size
    if rule == "max":
        return max(before, size)
    return size if before == 1 else before


def _sizes(terms, operands, broadcast=True, rule="broadcast"):
    """label -> size, by ``rule`` (with broadcast=False, its first size)."""
    sizes = {}
    for term, op in zip(terms, operands):
        for label, size in zip(term, op.shape):
            sizes[label] = _size(sizes.get(label), size, rule if broadcast else "first")
    return sizes


def _read(op, term, value):
    return op[tuple(0 if size == 1 else value.get(label, 0) for label, size in zip(term, op.shape))]


def _in_order(term, order):
    """``term``'s labels rearranged into ``order`` (a repeated label stays repeated): how an operand is
    read by an answer that indexes every operand in one global label order instead of its own."""
    return "".join(c for c in order for _ in range(term.count(c)))


def _first_seen(equation):
    return "".join(dict.fromkeys("".join(_split(equation)[0])))


@one_mistake
def _loops(equation, operands, *, output=None, assign=False, dtype="same", read=_read, broadcast=True,
           terms=None, start=1, first_operand_only=False, rule="broadcast"):
    """The definition with one knob per mistake."""
    given, out_labels = _split(equation)
    terms = terms or given
    output = out_labels if output is None else output
    sizes = _sizes(terms, operands, broadcast, rule)
    labels = list(output) + [c for c in sizes if c not in output]
    if first_operand_only:
        labels = list(dict.fromkeys(list(output) + [c for c in terms[0] if c not in output]))
    kind = operands[0].dtype if dtype == "same" else dtype
    out = torch.zeros([sizes[c] for c in output], dtype=kind, device=operands[0].device)
    for point in itertools.product(*(range(sizes[c]) for c in labels)):
        value = dict(zip(labels, point))
        product = start
        for op, term in zip(operands, terms):
            product = product * read(op, term, value)
        where = tuple(value[c] for c in output)
        if assign:
            out[where] = product
        else:
            out[where] += product
    return out


# ---------------------------------------------------------------- exercise 1: einsum_loops


@mutant(E, hint="you summed over the output labels too: labels written after '->' index the result "
        "(each combination of their values is one entry), only the other labels are summed")
def einsum_sums_everything(equation, *operands):
    return _loops(equation, operands, output="")


@mutant(E, hint="the output's dimensions must follow the order written after '->' ('ij->ji' is a "
        "transpose); yours are in alphabetical order")
def einsum_output_sorted(equation, *operands):
    _, output = _split(equation)
    return _loops(equation, operands, output="".join(sorted(output)))


@mutant(E, hint="use += to add each product into the result: with = only the last product of each "
        "entry is kept, and the sum over the summed labels is lost")
def einsum_assigns(equation, *operands):
    return _loops(equation, operands, assign=True)


@mutant(E, hint="the result must have the operands' dtype (int64 stays int64): create it with "
        "torch.zeros(shape, dtype=operands[0].dtype, device=operands[0].device)")
def einsum_float_result(equation, *operands):
    return _loops(equation, operands, dtype=torch.float32)


@mutant(E, hint="a label repeated inside one operand ('ii') is one loop variable, so the operand is read "
        "on its diagonal (op[i, i]); you treated the second i as a label of its own")
def einsum_ignores_diagonals(equation, *operands):
    terms, output = _split(equation)
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWxyz" if c not in equation)
    renamed = []
    for term in terms:
        seen, letters = set(), []
        for c in term:
            letters.append(next(spare) if c in seen else c)
            seen.add(c)
        renamed.append("".join(letters))
    return _loops(equation, operands, terms=renamed)


@mutant(E, hint="a dimension of size 1 broadcasts: the label runs over its size in the operands where it is "
        "not 1, and the size-1 operand is read at index 0 for every value")
def einsum_size_from_first_operand(equation, *operands):
    return _loops(equation, operands, broadcast=False)


@mutant(E, hint="a label runs over its size where that is not 1, even 0: with sizes 0 and 1 the label is "
        "empty (max(0, 1) is 1, which reads past the empty dimension)")
def einsum_size_by_max(equation, *operands):
    return _loops(equation, operands, rule="max")


@mutant(E, hint="a dimension of size 1 broadcasts wherever it comes: the label runs over its size in the operands "
        "where it is not 1; you took its size from the last operand that has it, which may be the 1")
def einsum_size_from_last_operand(equation, *operands):
    return _loops(equation, operands, rule="last")


@mutant(E, hint="a product starts at 1, not 0: product = 1, then product = product * entry for each operand "
        "(starting at 0 makes every product 0)")
def einsum_product_starts_at_zero(equation, *operands):
    return _loops(equation, operands, start=0)


@mutant(E, hint="every label of every operand needs a loop: a label that appears only in a later operand, and "
        "not in the output, is summed too (in 'ij,jk,kl->il', the k loop)")
def einsum_loops_over_first_operand_only(equation, *operands):
    return _loops(equation, operands, first_operand_only=True)


@mutant(E, hint="the running total must start from zero for every entry of the result: yours goes on "
        "from the previous entry")
def einsum_accumulator_not_reset(equation, *operands):
    terms, output = _split(equation)
    sizes = _sizes(terms, operands)
    summed = [c for c in sizes if c not in output]
    out = torch.zeros([sizes[c] for c in output], dtype=operands[0].dtype)
    total = 0
    for where in itertools.product(*(range(sizes[c]) for c in output)):
        for rest in itertools.product(*(range(sizes[c]) for c in summed)):
            value = dict(zip(output, where)) | dict(zip(summed, rest))
            product = 1
            for op, term in zip(operands, terms):
                product = product * _read(op, term, value)
            total = total + product
        out[where] = total
    return out


@mutant(E, hint="torch.ops.aten.einsum is torch.einsum under another name, and the check watches the operation: "
        "compute the result with loops over every label")
def loops_by_aten_einsum(equation, *operands):
    return torch.ops.aten.einsum(equation, list(operands))


@mutant(E, hint="numpy is not allowed in this exercise: loop over the tensors themselves, not numpy.einsum "
        "on .numpy() copies")
def loops_through_numpy(equation, *operands):
    return torch.from_numpy(np.einsum(equation, *[op.numpy() for op in operands]))


@mutant(E, hint="read each operand with its own labels, in the order its term writes them: in 'ij,kj->ik' the "
        "second operand is read at [k, j]; you read every operand in one order of the labels for all of them")
def einsum_reads_in_one_label_order(equation, *operands):
    order = _first_seen(equation)
    return _loops(equation, operands, read=lambda op, term, value: _read(op, _in_order(term, order), value))


# ---------------------------------------------------------------- exercise 2: loop_code


@one_mistake
def _source(equation, shapes, *, output=None, op="+=", zeros=None, broadcast=True, summed_loops=True, body=None,
            zeros_inside=False, rule="broadcast", index_order=None):
    terms, out_labels = _split(equation)
    output = out_labels if output is None else output
    sizes = {}
    for term, shape in zip(terms, shapes):
        for c, d in zip(term, shape):
            sizes[c] = _size(sizes.get(c), d, rule)
    summed = [c for c in sizes if c not in output]
    names = [f"op{n}" for n in range(len(shapes))]
    lines = ["import torch", "", f"def einsum_loops_generated({', '.join(names)}):",
             "    out = " + (zeros or f"torch.zeros({tuple(sizes[c] for c in output)}, dtype=op0.dtype)")]
    indent = "    "
    for c in list(output) + (summed if summed_loops else []):
        lines.append(f"{indent}for {c} in range({sizes[c]}):")
        indent += "    "
        if zeros_inside and len(indent) == 8:
            lines.append(indent + lines[3].strip())

    def index(term, shape):
        parts = ["0" if broadcast and d == 1 else c for c, d in zip(term, shape)]
        return "(" + "".join(p + ", " for p in parts) + ")"
    reading = [_in_order(term, index_order) for term in terms] if index_order else terms
    product = " * ".join(f"{name}[{index(term, shape)}]" for name, term, shape in zip(names, reading, shapes)) or "1"
    lines.append(f"{indent}out[{index(output, [0] * len(output))}] {op} {product}")
    lines.append("    return out")
    return body or "\n".join(lines) + "\n"


@mutant(C, hint="the generated function must compute with loops, not call torch.einsum")
def code_calls_einsum(equation, *shapes):
    args = ", ".join(f"op{n}" for n in range(len(shapes)))
    return (f"import torch\n\ndef einsum_loops_generated({args}):\n"
            f"    return torch.einsum({equation!r}, {args})\n")


@mutant(C, hint="the generated line must add into the result (+=): with = each entry keeps only the "
        "last product")
def code_assigns(equation, *shapes):
    return _source(equation, shapes, op="=")


@mutant(C, hint="the generated code must index the result in the output order written after '->'; "
        "yours uses alphabetical order (a transpose)")
def code_output_sorted(equation, *shapes):
    _, output = _split(equation)
    return _source(equation, shapes, output="".join(sorted(output)))


@mutant(C, hint="the generated result must have the operands' dtype: torch.zeros(shape, dtype=op0.dtype)")
def code_float_result(equation, *shapes):
    return _source(equation, shapes, zeros="torch.zeros(" + repr(tuple(
        max(d for t, s in zip(_split(equation)[0], shapes) for c2, d in zip(t, s) if c2 == c)
        for c in _split(equation)[1])) + ")")


@mutant(C, hint="a dimension of size 1 that broadcasts must be read at index 0 in the generated code, "
        "not with the loop variable")
def code_ignores_broadcasting(equation, *shapes):
    return _source(equation, shapes, broadcast=False)


@mutant(C, hint="every label needs a loop: the summed labels (those missing after '->') get loops too, "
        "inside the output labels' loops")
def code_without_summed_loops(equation, *shapes):
    return _source(equation, shapes, summed_loops=False)


@mutant(C, hint="create the zero result once, before the loops: created inside a loop, it is emptied again "
        "at every value of that loop's label and keeps only the last ones")
def code_zeros_inside_the_loops(equation, *shapes):
    return _source(equation, shapes, zeros_inside=True)


@mutant(C, hint="a label's loop runs over its size where that is not 1, even 0: with sizes 0 and 1 the "
        "label is empty (max(0, 1) is 1, which reads past the empty dimension)")
def code_size_by_max(equation, *shapes):
    return _source(equation, shapes, rule="max")


@mutant(C, hint="the check watches the operations the generated code runs, not only the names it writes: "
        "getattr(torch, 'ein' + 'sum') is torch.einsum all the same; compute with loops")
def code_hides_einsum_name(equation, *shapes):
    args = ", ".join(f"op{n}" for n in range(len(shapes)))
    hidden = f"    return getattr(torch, 'ein' + 'sum')({equation!r}, {args})"  # loops written, result from einsum
    return _source(equation, shapes).replace("    return out", hidden)


@mutant(C, hint="index each operand with its own labels, in the order its term writes them: in 'ij,kj->ik' the "
        "second operand is op1[k, j]; you indexed every operand in one order of the labels for all of them")
def code_indexes_in_one_label_order(equation, *shapes):
    return _source(equation, shapes, index_order=_first_seen(equation))


# ---------------------------------------------------------------- exercise 3: count_iterations


def _label_sizes(equation, shapes, broadcast=True):
    terms, _ = _split(equation)
    sizes = {}
    for term, shape in zip(terms, shapes):
        for c, d in zip(term, shape):
            sizes[c] = max(sizes.get(c, d), d) if broadcast else sizes.get(c, d)
    return sizes


@mutant(N, hint="a label shared by several operands (or repeated in one) is one loop, counted once: "
        "you multiplied every dimension of every operand")
def count_every_dimension(equation, *shapes):
    return math.prod(d for shape in shapes for d in shape)


@mutant(N, hint="a dimension of size 0 makes its loop run 0 times: a label's size is the size other than 1 "
        "(size 1 is the one that broadcasts), and max(0, 1) is 1, not 0")
def count_size_by_max(equation, *shapes):
    sizes = {}
    for term, shape in zip(_split(equation)[0], shapes):
        for c, d in zip(term, shape):
            sizes[c] = max(sizes.get(c, 1), d)
    return math.prod(sizes.values())


@mutant(N, hint="the summed labels have loops too: multiply the sizes of all labels, not only the output's")
def count_output_only(equation, *shapes):
    sizes = _label_sizes(equation, shapes)
    return math.prod(sizes[c] for c in _split(equation)[1])


@mutant(N, hint="nested loops multiply: a loop of 3 inside a loop of 4 runs 12 times, not 7")
def count_sum_of_sizes(equation, *shapes):
    return sum(_label_sizes(equation, shapes).values())


@mutant(N, hint="a size-1 dimension broadcasts: the label runs over the largest size it has, not the "
        "size in the first operand that has it")
def count_first_size(equation, *shapes):
    return math.prod(_label_sizes(equation, shapes, broadcast=False).values())


@mutant(N, hint="a size-1 dimension broadcasts wherever it comes: the label runs over its size where it is not "
        "1, not the size in the last operand that has it")
def count_last_size(equation, *shapes):
    sizes = {}
    for term, shape in zip(_split(equation)[0], shapes):
        for c, d in zip(term, shape):
            sizes[c] = d
    return math.prod(sizes.values())


@mutant(N, hint="every label of every operand has a loop, also a summed label that only a later operand has "
        "(in 'ij,jk,kl->il', the k loop)")
def count_first_operand_and_output(equation, *shapes):
    terms, output = _split(equation)
    sizes = _label_sizes(equation, shapes)
    return math.prod(sizes[c] for c in set(terms[0]) | set(output))


@mutant(N, hint="count the iterations of the innermost statement, not the multiplications in it")
def count_multiplications(equation, *shapes):
    return math.prod(_label_sizes(equation, shapes).values()) * max(len(shapes) - 1, 1)


@mutant(N, hint="torch.ops.aten.einsum is torch.einsum under another name, and the check watches the operation: "
        "multiply the sizes of the labels with math.prod")
def count_by_aten_einsum(equation, *shapes):
    inputs = equation.split("->")[0]
    return int(torch.ops.aten.einsum(inputs + "->", [torch.ones(s, dtype=torch.int64) for s in shapes]))
