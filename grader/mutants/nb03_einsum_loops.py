"""Known-wrong answers to notebook 03's exercises (einsum as loops), each with the hint its author needs.

No mutant holds a right answer. The loop_code and count_iterations mutants are patches of the
library's own stages (``grader.mutants.patched``); an einsum_loops mutant is a patch of the library's
code generator whose loops it runs on the operands (the library's einsum_loops computes with numpy,
which the exercise forbids, while the generated loops are the torch loops the exercise asks for);
the rest are small standalone wrong answers (a forbidden route to the result).
"""
import numpy as np
import torch

from tensorcraft.einstein.loops import GENERATED_NAME, _subscript, count_iterations, loop_code

from . import mutant, patched

E = "nb03_einsum_loops.einsum_loops"
C = "nb03_einsum_loops.loop_code"
N = "nb03_einsum_loops.count_iterations"


# ---------------------------------------------------------------- edits shared by the mutants

PARSE = "eq = parse_equation(equation, shapes)"   # the first line of loop_code and of count_iterations


def sizes_by(rule):
    """The edit that gives each label the size ``rule`` picks (``size`` is this dimension's, ``wrong`` the
    sizes picked so far) instead of its broadcast size (the one that is not 1, so 0 against 1 is 0)."""
    return (PARSE, PARSE + "\n    wrong = {}\n    for labels, shape in zip(eq.input_labels, eq.shapes):\n"
            f"        for label, size in zip(labels, shape):\n            wrong[label] = {rule}\n"
            "    eq.sizes.update(wrong)")


SIZE_BY_MAX = sizes_by("max(wrong.get(label, size), size)")
OUTPUT_SORTED = (PARSE, "eq = parse_equation(equation.split('->')[0] + '->' + ''.join(sorted(equation.split('->')[1])), "
                        "shapes)")
ASSIGNS = ("] += {factors}", "] = {factors}")
ONE_LABEL_ORDER = ("_subscript(labels, shape, eq.sizes)",
                   "_subscript(tuple(sorted(labels, key=[a for term in eq.input_labels for a in term].index)), "
                   "shape, eq.sizes)")
ZEROS = "dtype=op0.dtype, device=op0.device"


# ---------------------------------------------------------------- exercise 1: einsum_loops


def _running_its_loops(edited, equation, *operands):
    """The loops the edited code generator writes for the operands' shapes, run on the operands."""
    namespace = {}
    exec(compile(edited(equation, *(tuple(op.shape) for op in operands)), "<mutant loops>", "exec"), namespace)
    return namespace[GENERATED_NAME](*operands)


def _einsum_mutant(name, *edits, hint):
    patched(E, name, loop_code, *edits, hint=hint, adapt=_running_its_loops)


_einsum_mutant("einsum_sums_everything", ("out = torch.zeros({eq.output_shape}", "out = torch.zeros({()}"),
               ("out[{_subscript(eq.output_labels, eq.output_shape, eq.sizes)}]", "out[()]"),
               hint="you summed over the output labels too: labels written after '->' index the result "
               "(each combination of their values is one entry), only the other labels are summed")

_einsum_mutant("einsum_output_sorted", OUTPUT_SORTED,
               hint="the output's dimensions must follow the order written after '->' ('ij->ji' is a "
               "transpose); yours are in alphabetical order")

_einsum_mutant("einsum_assigns", ASSIGNS,
               hint="use += to add each product into the result: with = only the last product of each "
               "entry is kept, and the sum over the summed labels is lost")

_einsum_mutant("einsum_float_result", (ZEROS, "dtype=torch.float32, device=op0.device"),
               hint="the result must have the operands' dtype (int64 stays int64): create it with "
               "torch.zeros(shape, dtype=operands[0].dtype, device=operands[0].device)")

_einsum_mutant("einsum_ignores_diagonals",
               (PARSE, "spare = iter(c for c in 'ABCDEFGHIJKLMNOPQRSTUVWxyz' if c not in equation)\n"
                       "    terms, output = equation.split('->')\n"
                       "    terms = ','.join(''.join(next(spare) if c in term[:k] else c for k, c in enumerate(term))\n"
                       "                     for term in terms.split(','))\n"
                       "    eq = parse_equation(terms + '->' + output, shapes)"),
               hint="a label repeated inside one operand ('ii') is one loop variable, so the operand is read "
               "on its diagonal (op[i, i]); you treated the second i as a label of its own")

_einsum_mutant("einsum_size_from_first_operand", sizes_by("wrong.get(label, size)"),
               hint="a dimension of size 1 broadcasts: the label runs over its size in the operands where it is "
               "not 1, and the size-1 operand is read at index 0 for every value")

_einsum_mutant("einsum_size_by_max", SIZE_BY_MAX,
               hint="a label runs over its size where that is not 1, even 0: with sizes 0 and 1 the label is "
               "empty (max(0, 1) is 1, which reads past the empty dimension)")

_einsum_mutant("einsum_size_from_last_operand", sizes_by("size"),
               hint="a dimension of size 1 broadcasts wherever it comes: the label runs over its size in the operands "
               "where it is not 1; you took its size from the last operand that has it, which may be the 1")

_einsum_mutant("einsum_product_starts_at_zero", ("+= {factors}", "+= 0 * {factors}"),
               hint="a product starts at 1, not 0: product = 1, then product = product * entry for each operand "
               "(starting at 0 makes every product 0)")

# a summed label that only a later operand has gets no loop: it stays at its first value, 0
_einsum_mutant("einsum_loops_over_first_operand_only",
               ("range({eq.sizes[label]})",
                "range({eq.sizes[label] if label in eq.output_labels or label in eq.input_labels[0] else 1})"),
               hint="every label of every operand needs a loop: a label that appears only in a later operand, and "
               "not in the output, is summed too (in 'ij,jk,kl->il', the k loop)")

_einsum_mutant("einsum_accumulator_not_reset", (ZEROS + ')",', ZEROS + ')",\n        "    total = 0",'),
               ("lines.append(f\"{indent}out[{_subscript(eq.output_labels, eq.output_shape, eq.sizes)}] += {factors}\")",
                "lines.append(f\"{indent}total = total + {factors}\")\n"
                "    lines.append(f\"{indent}out[{_subscript(eq.output_labels, eq.output_shape, eq.sizes)}] = total\")"),
               hint="the running total must start from zero for every entry of the result: yours goes on "
               "from the previous entry")


_einsum_mutant("einsum_result_on_the_cpu", (ZEROS, "dtype=op0.dtype"),
               hint="a new tensor is created on the CPU unless told otherwise: create the result on the operands' "
               "device, torch.zeros(shape, dtype=operands[0].dtype, device=operands[0].device)")


@mutant(E, hint="torch.ops.aten.einsum is torch.einsum under another name, and the check watches the operation: "
        "compute the result with loops over every label")
def loops_by_aten_einsum(equation, *operands):
    return torch.ops.aten.einsum(equation, list(operands))


@mutant(E, hint="numpy is not allowed in this exercise: loop over the tensors themselves, not numpy.einsum "
        "on .numpy() copies")
def loops_through_numpy(equation, *operands):
    return torch.from_numpy(np.einsum(equation, *[op.numpy() for op in operands]))


_einsum_mutant("einsum_reads_in_one_label_order", ONE_LABEL_ORDER,
               hint="read each operand with its own labels, in the order its term writes them: in 'ij,kj->ik' the "
               "second operand is read at [k, j]; you read every operand in one order of the labels for all of them")


# ---------------------------------------------------------------- exercise 2: loop_code


@mutant(C, hint="the generated function must compute with loops, not call torch.einsum")
def code_calls_einsum(equation, *shapes):
    args = ", ".join(f"op{n}" for n in range(len(shapes)))
    return (f"import torch\n\ndef einsum_loops_generated({args}):\n"
            f"    return torch.einsum({equation!r}, {args})\n")


patched(C, "code_assigns", loop_code, ASSIGNS,
        hint="the generated line must add into the result (+=): with = each entry keeps only the "
        "last product")

patched(C, "code_output_sorted", loop_code, OUTPUT_SORTED,
        hint="the generated code must index the result in the output order written after '->'; "
        "yours uses alphabetical order (a transpose)")

patched(C, "code_float_result", loop_code, (", " + ZEROS + ")", ")"),
        hint="the generated result must have the operands' dtype: torch.zeros(shape, dtype=op0.dtype)")

patched(C, "code_result_on_the_cpu", loop_code, (ZEROS, "dtype=op0.dtype"),
        hint="a new tensor is created on the CPU unless told otherwise: print the result's creation with the "
        "operands' device, torch.zeros(shape, dtype=op0.dtype, device=op0.device)")

patched(C, "code_ignores_broadcasting", loop_code,
        (_subscript, '"0" if size == 1 and sizes[label] != 1 else _variable(label)',
         "_variable(label)"),
        hint="a dimension of size 1 that broadcasts must be read at index 0 in the generated code, "
        "not with the loop variable")

patched(C, "code_without_summed_loops", loop_code, ("for label in order:", "for label in eq.output_labels:"),
        hint="every label needs a loop: the summed labels (those missing after '->') get loops too, "
        "inside the output labels' loops")

patched(C, "code_zeros_inside_the_loops", loop_code,
        ('indent += "    "', 'indent += "    "\n        if len(indent) == 8:  # inside the outermost loop\n'
                            '            lines.append(indent + next(line.strip() for line in lines if "out = " in line))'),
        hint="create the zero result once, before the loops: created inside a loop, it is emptied again "
        "at every value of that loop's label and keeps only the last ones")

patched(C, "code_size_by_max", loop_code, SIZE_BY_MAX,
        hint="a label's loop runs over its size where that is not 1, even 0: with sizes 0 and 1 the "
        "label is empty (max(0, 1) is 1, which reads past the empty dimension)")

# loops written, the result taken from einsum all the same
patched(C, "code_hides_einsum_name", loop_code,
        ('lines.append("    return out")',
         "lines.append(f\"    return getattr(torch, 'ein' + 'sum')({equation!r}, {', '.join(names)})\")"),
        hint="the check watches the operations the generated code runs, not only the names it writes: "
        "getattr(torch, 'ein' + 'sum') is torch.einsum all the same; compute with loops")

patched(C, "code_indexes_in_one_label_order", loop_code, ONE_LABEL_ORDER,
        hint="index each operand with its own labels, in the order its term writes them: in 'ij,kj->ik' the "
        "second operand is op1[k, j]; you indexed every operand in one order of the labels for all of them")


# ---------------------------------------------------------------- exercise 3: count_iterations

PRODUCT = "math.prod(eq.sizes.values())"

patched(N, "count_every_dimension", count_iterations, (PRODUCT, "math.prod(d for shape in shapes for d in shape)"),
        hint="a label shared by several operands (or repeated in one) is one loop, counted once: "
        "you multiplied every dimension of every operand")

patched(N, "count_size_by_max", count_iterations, sizes_by("max(wrong.get(label, 1), size)"),
        hint="a dimension of size 0 makes its loop run 0 times: a label's size is the size other than 1 "
        "(size 1 is the one that broadcasts), and max(0, 1) is 1, not 0")

patched(N, "count_output_only", count_iterations,
        ("eq.sizes.values()", "(eq.sizes[label] for label in eq.output_labels)"),
        hint="the summed labels have loops too: multiply the sizes of all labels, not only the output's")

patched(N, "count_sum_of_sizes", count_iterations, ("math.prod(", "sum("),
        hint="nested loops multiply: a loop of 3 inside a loop of 4 runs 12 times, not 7")

patched(N, "count_first_size", count_iterations, sizes_by("wrong.get(label, size)"),
        hint="a size-1 dimension broadcasts: the label runs over the largest size it has, not the "
        "size in the first operand that has it")

patched(N, "count_last_size", count_iterations, sizes_by("size"),
        hint="a size-1 dimension broadcasts wherever it comes: the label runs over its size where it is not "
        "1, not the size in the last operand that has it")

patched(N, "count_first_operand_and_output", count_iterations,
        ("eq.sizes.values()", "(eq.sizes[label] for label in set(eq.input_labels[0]) | set(eq.output_labels))"),
        hint="every label of every operand has a loop, also a summed label that only a later operand has "
        "(in 'ij,jk,kl->il', the k loop)")

patched(N, "count_multiplications", count_iterations, (PRODUCT, PRODUCT + " * max(len(shapes) - 1, 1)"),
        hint="count the iterations of the innermost statement, not the multiplications in it")


@mutant(N, hint="torch.ops.aten.einsum is torch.einsum under another name, and the check watches the operation: "
        "multiply the sizes of the labels with math.prod")
def count_by_aten_einsum(equation, *shapes):
    inputs = equation.split("->")[0]
    return int(torch.ops.aten.einsum(inputs + "->", [torch.ones(s, dtype=torch.int64) for s in shapes]))
