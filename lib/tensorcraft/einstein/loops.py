"""Einsum by its definition: explicit loops over every label. Slow on purpose; for small sizes.

    out[output labels] = sum over the other labels of  op0[...] * op1[...] * ...

Every label, bound or summed, runs over its (broadcast) size. An operand indexes each of its
dimensions by that dimension's label; a repeated label therefore reads the diagonal, and a
dimension of size 1 facing a larger size elsewhere (broadcasting) is always read at index 0.

`einsum_loops` runs that definition directly; `loop_code` prints it as nested Python loops, one
`for` per label, that `exec` can run.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tensorcraft.einstein.infer import ELLIPSIS_PREFIX, is_ellipsis_label
from tensorcraft.einstein.parse import Equation, parse_equation, split_arguments

GENERATED_NAME = "einsum_loops_generated"


def loop_order(eq: Equation) -> tuple[str, ...]:
    """Output labels first (outer loops), then the summed labels in order of first appearance."""
    summed = []
    for labels in eq.input_labels:
        for label in labels:
            if label not in eq.output_labels and label not in summed:
                summed.append(label)
    return tuple(eq.output_labels) + tuple(summed)


def _element_index(labels: tuple[str, ...], shape: tuple[int, ...], value: dict[str, int]) -> tuple[int, ...]:
    """Where an operand is read for the current label values: 0 along broadcast (size-1) dimensions."""
    return tuple(0 if size == 1 else value[label] for label, size in zip(labels, shape))


def _to_numpy(operand: Any) -> np.ndarray:
    if hasattr(operand, "detach"):  # a torch tensor
        return operand.detach().cpu().numpy()
    return np.asarray(operand)


def einsum_loops(equation: str, *operands: Any) -> Any:
    """einsum by the definition, one multiply-add per point of the full index space.

    Accepts what `tensorcraft.einsum` accepts (equation and operands, or the sublist format);
    numpy arrays in give a numpy array out (0-d for a scalar result); as soon as one operand is
    a torch tensor, the result is a tensor (no autograd) on the first tensor's device.
    """
    text, operands = split_arguments((equation, *operands))
    arrays = [_to_numpy(op) for op in operands]
    eq = parse_equation(text, [a.shape for a in arrays])
    order = loop_order(eq)
    out = np.zeros(eq.output_shape, dtype=np.result_type(*arrays))
    for point in itertools.product(*(range(eq.sizes[label]) for label in order)):
        value = dict(zip(order, point))
        product = out.dtype.type(1)
        for array, labels in zip(arrays, eq.input_labels):
            product = product * array[_element_index(labels, array.shape, value)]
        out[tuple(value[label] for label in eq.output_labels)] += product
    tensors = [op for op in operands if hasattr(op, "detach")]
    if tensors:
        import torch

        return torch.from_numpy(out).to(tensors[0].device)
    return out


# --------------------------------------------------------------------------- the code generator


def _variable(label: str) -> str:
    """Loop variable of a label: the letter itself, or e0, e1, ... for ellipsis dimensions."""
    return "e" + label[len(ELLIPSIS_PREFIX):] if is_ellipsis_label(label) else label


def _subscript(labels: tuple[str, ...], shape: tuple[int, ...], sizes: dict[str, int]) -> str:
    """`i, j` for a 2-d operand; `0` where a size-1 dimension broadcasts; `()` for a scalar."""
    parts = ["0" if size == 1 and sizes[label] != 1 else _variable(label) for label, size in zip(labels, shape)]
    if not parts:
        return "()"
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


def loop_code(equation: str, *shapes: tuple[int, ...]) -> str:
    """Python source of the nested loops that compute `equation` for operands of these shapes.

    The source defines `def einsum_loops_generated(op0, op1, ...)`: it takes numpy arrays of the
    given shapes (one per operand) and returns the result as a numpy array (0-d for a scalar).
    Run it with::

        namespace = {}
        exec(loop_code("ij,jk->ik", (2, 3), (3, 4)), namespace)
        out = namespace["einsum_loops_generated"](a, b)
    """
    eq = parse_equation(equation, shapes)
    names = [f"op{n}" for n in range(len(shapes))]
    order = loop_order(eq)
    summed = [label for label in order if label not in eq.output_labels]
    lines = [
        "import numpy as np",
        "",
        "",
        f"def {GENERATED_NAME}({', '.join(names)}):",
        f'    """{eq.normalized} for shapes {", ".join(str(tuple(s)) for s in eq.shapes)}."""',
        f"    out = np.zeros({eq.output_shape}, dtype=np.result_type({', '.join(names)}))",
    ]
    indent = "    "
    for label in order:
        note = "  # summed" if label in summed else ""
        lines.append(f"{indent}for {_variable(label)} in range({eq.sizes[label]}):{note}")
        indent += "    "
    factors = " * ".join(f"{name}[{_subscript(labels, shape, eq.sizes)}]"
                         for name, labels, shape in zip(names, eq.input_labels, eq.shapes))
    lines.append(f"{indent}out[{_subscript(eq.output_labels, eq.output_shape, eq.sizes)}] += {factors}")
    lines.append("    return out")
    return "\n".join(lines) + "\n"
