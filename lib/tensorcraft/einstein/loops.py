"""Einsum by its definition: explicit loops over every label. Slow on purpose; for small sizes.

    out[output labels] = sum over the other labels of  op0[...] * op1[...] * ...

Every label, kept or summed, runs over its (broadcast) size. An operand indexes each of its
dimensions by that dimension's label; a repeated label therefore reads the diagonal, and a
dimension of size 1 facing a larger size elsewhere (broadcasting) is always read at index 0.

Three stages, each swappable (``tensorcraft.substitute(einsum_loops=...)``, notebook 03):

- `einsum_loops` runs that definition directly;
- `loop_code` prints it as nested Python loops, one ``for`` per label, that ``exec`` can run;
- `count_iterations` says how many times the innermost statement runs (the product of every
  label's size), which is how long the loops take.

`einsum_by_definition` is the pipeline that calls them: it takes whatever `tensorcraft.einsum`
takes (implicit output, ``...``, the sublist format, numpy arrays, numbers), hands the stages an
explicit equation of letters and torch tensors of one dtype, refuses a call that would run more
than ``max_iterations`` iterations, and gives numpy arrays back for numpy input. It is the
reference the library's fast path is tested against.
"""
from __future__ import annotations

import itertools
import math
import operator
import string
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from tensorcraft.einstein.infer import ELLIPSIS_PREFIX, is_ellipsis_label
from tensorcraft.einstein.parse import EinsumError, Equation, parse_equation, split_arguments
from tensorcraft.stages import swappable

GENERATED_NAME = "einsum_loops_generated"
DEFAULT_MAX_ITERATIONS = 1_000_000  # about a second or more of Python loops: beyond, use tensorcraft.einsum


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
    if isinstance(operand, torch.Tensor):
        return operand.detach().cpu().numpy()
    return np.asarray(operand)


@swappable
def einsum_loops(equation: str, *operands: Any) -> Any:
    """einsum by the definition, one multiply-add per point of the full index space.

    The stage's contract (what `einsum_by_definition` passes and what a substitute must handle):
    an explicit equation of letters and torch tensors of one dtype in, a tensor of that dtype out,
    on the operands' device. The library's own version accepts more: anything `parse_equation`
    does, numpy arrays (a numpy array out) and the sublist format.
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
    tensors = [op for op in operands if isinstance(op, torch.Tensor)]
    if tensors:
        return torch.from_numpy(out).to(tensors[0].device)
    return out


@swappable
def count_iterations(equation: str, *shapes: Sequence[int]) -> int:
    """How many times the loops of `equation` run their innermost statement, for operands of these
    shapes: the product of every label's size (broadcast sizes, a repeated label counted once)."""
    eq = parse_equation(equation, shapes)
    return math.prod(eq.sizes.values())


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


@swappable
def loop_code(equation: str, *shapes: Sequence[int]) -> str:
    """Python source of the nested loops that compute `equation` for operands of these shapes.

    The source defines `def einsum_loops_generated(op0, op1, ...)`: it takes tensors of the given
    shapes and one dtype (numpy arrays too), and returns a tensor of that dtype on their device.
    Run it with `generated_function`, or::

        namespace = {}
        exec(loop_code("ij,jk->ik", (2, 3), (3, 4)), namespace)
        out = namespace["einsum_loops_generated"](a, b)
    """
    eq = parse_equation(equation, shapes)
    names = [f"op{n}" for n in range(len(shapes))]
    order = loop_order(eq)
    summed = [label for label in order if label not in eq.output_labels]
    lines = [
        "import torch",
        "",
        "",
        f"def {GENERATED_NAME}({', '.join(names)}):",
        f'    """{eq.normalized} for shapes {", ".join(str(tuple(s)) for s in eq.shapes)}."""',
        f"    {', '.join(names)} = {', '.join(f'torch.as_tensor({name})' for name in names)}  # numpy arrays too",
        f"    out = torch.zeros({eq.output_shape}, dtype=op0.dtype, device=op0.device)",
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


def generated_function(equation: str, *shapes: Sequence[int]) -> Callable[..., Any]:
    """Ask the `loop_code` stage for the source, run it, and return the function it defines.

    The function's `source` attribute holds the source it came from.
    """
    source = loop_code(equation, *shapes)
    if not isinstance(source, str):
        raise TypeError(f"loop_code({equation!r}, ...) must return Python source as a str, "
                        f"got {type(source).__name__}")
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<loop_code {equation}>", "exec"), namespace)
    function = namespace.get(GENERATED_NAME)
    if not callable(function):
        raise ValueError(f"the source from loop_code({equation!r}, ...) defines no function "
                         f"{GENERATED_NAME}(op0, op1, ...); it must, so that it can be called")
    function.source = source
    return function


# --------------------------------------------------------------------------- the pipeline


@dataclass(frozen=True)
class DefinitionCall:
    """An einsum call made ready for the stages: explicit letters, tensors of one dtype."""

    equation: str                      # explicit, letters only: 'ij,jk->ik'; '...' became letters
    operands: tuple[torch.Tensor, ...]
    numpy_out: bool                    # no operand was a tensor: give a numpy array back
    iterations: int                    # what the `count_iterations` stage says the loops will run

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(t.shape) for t in self.operands)


def _letters_only(eq: Equation) -> str:
    """The explicit equation with each ellipsis dimension renamed to a letter the equation does not use."""
    used = {label for labels in eq.input_labels for label in labels}
    free = (c for c in string.ascii_lowercase + string.ascii_uppercase if c not in used)
    names: dict[str, str] = {}
    for label in sorted(used):
        if is_ellipsis_label(label):
            try:
                names[label] = next(free)
            except StopIteration:
                raise EinsumError(f"einsum_by_definition: {eq.text!r} leaves no free letter to name "
                                  f"its ellipsis dimensions with") from None
    def term(labels: tuple[str, ...]) -> str:
        return "".join(names.get(label, label) for label in labels)
    return ",".join(map(term, eq.input_labels)) + "->" + term(eq.output_labels)


def _as_tensors(operands: Sequence[Any]) -> tuple[list[torch.Tensor], bool]:
    """Tensors of one (promoted) dtype; numbers and lists join the first tensor's device."""
    if not any(isinstance(op, torch.Tensor) for op in operands):
        arrays = [np.asarray(op) for op in operands]
        dtype = np.result_type(*arrays)
        return [torch.from_numpy(a.astype(dtype, order="C")) for a in arrays], True
    device = next(op.device for op in operands if isinstance(op, torch.Tensor))
    tensors = [op if isinstance(op, torch.Tensor) else torch.as_tensor(op, device=device) for op in operands]
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return [t.to(dtype) for t in tensors], False


def bind_call(*args: Any) -> DefinitionCall:
    """Everything `einsum_by_definition` does before the loops run, the `count_iterations` stage included."""
    text, operands = split_arguments(args)
    tensors, numpy_out = _as_tensors(operands)
    shapes = [tuple(t.shape) for t in tensors]
    explicit = _letters_only(parse_equation(text, shapes))
    counted = count_iterations(explicit, *shapes)
    try:
        iterations = operator.index(counted)
    except TypeError:
        raise TypeError(f"count_iterations({explicit!r}, ...) must return an int, got "
                        f"{type(counted).__name__} {counted!r}") from None
    return DefinitionCall(explicit, tuple(tensors), numpy_out, iterations)


def einsum_by_definition(*args: Any, generated: bool = False,
                         max_iterations: int | None = DEFAULT_MAX_ITERATIONS) -> Any:
    """einsum computed by its definition, through the stages of this module.

    Takes what `tensorcraft.einsum` takes; runs the `einsum_loops` stage, or with
    ``generated=True`` the function that the `loop_code` stage writes. Raises EinsumError, before
    any loop runs, when `count_iterations` says the loops would run more than ``max_iterations``
    times (``None``: no limit).
    """
    call = bind_call(*args)
    if max_iterations is not None and call.iterations > max_iterations:
        raise TooManyIterations(call, max_iterations)
    if generated:
        out = generated_function(call.equation, *call.shapes)(*call.operands)
    else:
        out = einsum_loops(call.equation, *call.operands)
    if call.numpy_out:
        out = out.numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
        return out[()] if out.ndim == 0 else out
    return out


class TooManyIterations(EinsumError):
    """The loops would run longer than the caller allowed; `.iterations` says how many times."""

    def __init__(self, call: DefinitionCall, max_iterations: int) -> None:
        self.iterations = call.iterations
        super().__init__(
            f"einsum_by_definition: {call.equation!r} for shapes {', '.join(map(str, call.shapes))} runs its "
            f"innermost statement {call.iterations:,} times, more than max_iterations={max_iterations:,}; "
            f"use tensorcraft.einsum, or pass max_iterations=None to wait")
