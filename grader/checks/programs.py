"""One type for "a small torch program" in the checks of the compiler's stages (notebooks 07 to 11).

A :class:`Program` is a straight-line torch function given as source text: its parameters and its body,
one statement a line. That one description serves every side of a case:

* a learner reads it as they would write it (``repr``: the body's lines; ``show``: with the inputs' shapes);
* it runs eagerly (``eager``): the ground truth the compiled program must match;
* it makes its own inputs (``inputs(g, device=)``) from the parameters' shapes, drawn by the case's
  generator, on the CPU, on CUDA or on ``meta``; a case with inputs of its own (broadcast, transposed)
  passes them instead;
* :func:`draw` makes a random one from a vocabulary of steps (each notebook's: matmuls, reductions and views
  for fusion and memory in 09, elementwise chains for the kernels of 10), so that hidden cases are drawn
  from the seeded generator (``seed.draw``) like every other random case;
* a parameter may be a plain Python number (``numbers``: its value, passed by ``arguments``), and a program
  may be a model (``module``: a factory of the ``nn.Module`` whose forward is the program; ``build`` makes a
  fresh one on the device, since a model cannot travel inside a case, whose tensors alone are moved).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

import tensorcraft

from .compare import rounded
from .seed import draw as draw_int
from .seed import pick

# what a program's source may name besides its parameters (tensorcraft: its einsum and rearrange)
NAMESPACE = {"torch": torch, "F": F, "math": math, "tensorcraft": tensorcraft}


@dataclass(frozen=True)
class Program:
    """A straight-line torch function ``name(*params)`` whose body is ``body``, one statement a line.
    ``shapes`` (one per parameter) and ``divide_by`` (default 1: standard normal values) say how ``inputs``
    draws its arguments (a matrix divided by the square root of its rows keeps a product's values near 1)."""
    body: tuple[str, ...]
    params: tuple[str, ...] = ("x",)
    shapes: tuple[tuple[int, ...], ...] = ()
    divide_by: tuple[float, ...] = ()
    name: str = "f"
    constants: tuple[tuple[str, Any], ...] = ()   # values the source reads by name (a global tensor)
    numbers: tuple[tuple[str, Any], ...] = ()     # parameters that are plain Python numbers, and their values
    module: Callable[[], torch.nn.Module] | None = None  # the program is this model's forward (body: unused)

    @property
    def source(self) -> str:
        return f"def {self.name}({', '.join(self.params)}):\n" + "".join(f"    {line}\n" for line in self.body)

    @functools.cached_property
    def fn(self) -> Callable[..., Any]:
        if self.module is not None:
            return self.module()
        namespace = dict(NAMESPACE) | dict(self.constants)
        exec(compile(self.source, f"<program {self.name}>", "exec"), namespace)
        return namespace[self.name]

    def __call__(self, *inputs: Any) -> Any:
        return self.fn(*inputs)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a truth's key, a worker's case) without the function made from the source."""
        return {k: v for k, v in self.__dict__.items() if k != "fn"}

    def __repr__(self) -> str:
        return "; ".join(self.body) or self.name

    def build(self, device: str | torch.device = "cpu") -> Callable[..., Any]:
        """The program to run on ``device``: the function, or a fresh model made there."""
        return self.fn if self.module is None else self.module().to(device)

    def arguments(self, *tensors: Any) -> tuple:
        """The call's arguments in the parameters' order: ``tensors`` one by one, the ``numbers`` by name."""
        numbers, given = dict(self.numbers), iter(tensors)
        return tuple(numbers[p] if p in numbers else next(given) for p in self.params)

    def eager(self, *inputs: Any) -> tuple:
        """The ground truth: the program run by eager PyTorch, its results as a tuple."""
        with torch.no_grad():
            out = self.fn(*inputs)
        return tuple(out) if isinstance(out, tuple) else (out,)

    def truth(self, *inputs: Any) -> Any:
        """The ground truth of a compiled run: eager's result, each float32 (or half) tensor of it paired
        with the program's result on float64 copies of the inputs (``compare.Rounded``: a compiler
        rounds differently). Eager's result alone for a model (a float64 twin would be a new model) and
        where the program will not run in float64."""
        with torch.no_grad():
            out = self.fn(*inputs)
            if self.module is not None:
                return out
            try:
                exact = self.fn(*(t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                                  for t in inputs))
            except Exception:       # a step that insists on its dtype: no float64 twin
                return out
        return rounded(out, exact)

    def inputs(self, g: torch.Generator, device: str | torch.device = "cpu",
               dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
        """One tensor per parameter, of its shape, drawn by ``g`` (on the CPU, then moved to ``device``)."""
        divisors = self.divide_by or (1,) * len(self.shapes)
        return tuple((torch.randn(*shape, generator=g) / d if d != 1 else torch.randn(*shape, generator=g))
                     .to(dtype=dtype, device=device) for shape, d in zip(self.shapes, divisors))

    def show(self, inputs: Sequence[torch.Tensor] = ()) -> str:
        """The case as a learner reads it: the function on one line, and its inputs' shapes and dtype."""
        shapes = ", ".join(f"{name} {tuple(t.shape)}{'' if t.is_contiguous() else ' (transposed)'}"
                           for name, t in zip(self.params, inputs))
        dtype = f", {str(inputs[0].dtype).removeprefix('torch.')}" if inputs else ""
        return f"{self.name}({', '.join(self.params)}): {self!r}" + (f"  with {shapes}{dtype}" if inputs else "")


# A step of a drawn program: (generator, the operand's name, the names of the values so far) -> an expression.
Step = Callable[[torch.Generator, str, list[str]], str]


def draw(g: torch.Generator, vocabulary: Sequence[Step], steps: int, *, params: tuple[str, ...] = ("x",),
         start: Sequence[str] | None = None, reach: int = 2, join: Step | None = None, prefix: str = "v",
         returns: Callable[[torch.Generator, list[str]], str] | None = None, **program: Any) -> Program:
    """A random program of ``steps`` statements ``v0 = ...``, ``v1 = ...`` (``prefix`` names the values) over ``params``. Each applies a step
    drawn from ``vocabulary`` (a step listed twice is drawn twice as often; its expression may follow statements of
    its own, one a line, as ``t = x * 2\nt``) to one of the last ``reach`` values,
    starting from ``start`` (default: the parameters). ``join`` first combines the parameters one by one
    (``v0 = join(x0, x1)``, ``v1 = join(v0, x2)``...), so that every input is read. ``returns`` writes the return
    expression from the values (default: the last value). ``program``: the Program's other fields (shapes, divide_by, name)."""
    lines: list[str] = []
    values = list(start if start is not None else params)
    count = len(values)

    def add(step: str) -> None:  # a step may put statements of its own first, a line each: "t = x * 2\nt.relu_()"
        *statements, expression = step.split("\n")
        name = f"{prefix}{len(values) - count}"
        lines.extend([*statements, f"{name} = {expression}"])
        values.append(name)

    for other in params[1:] if join is not None else ():
        add(join(g, values[-1] if len(values) > count else params[0], [other]))
    for _ in range(steps):
        operand = values[-1 - draw_int(g, min(reach, len(values)))]
        add(pick(g, vocabulary)(g, operand, values))
    lines.append(f"return {returns(g, values) if returns else values[-1]}")
    return Program(tuple(lines), params, **program)
