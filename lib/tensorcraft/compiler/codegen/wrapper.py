"""The wrapper: one readable Python function that runs a whole optimized Graph.

What Inductor calls the wrapper (``TORCH_LOGS=output_code`` prints it): allocate each fused
kernel's outputs (from the memory plan's slots, or fresh when returned), call the kernels, call
torch for everything that was not fused (matmul, convolution, reshapes: "extern kernels"), and
``del`` every intermediate right after its last use so its memory goes back at once.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ... import trees
from .. import functional
from ..ir import Graph, Node
from ..plans import MemoryPlan, is_kernel_output
from .kernel import CompiledKernel, Kernel
from .literals import python_float
from ...stages import swappable

# Modules searched, in order, to print a callable by its public path (torch.nn.functional.linear).
_MODULES = [
    ("torch.nn.functional", torch.nn.functional), ("torch", torch), ("torch.Tensor", torch.Tensor),
    ("torch.special", torch.special), ("torch.linalg", torch.linalg), ("torch.fft", torch.fft),
    ("torch._C._nn", torch._C._nn), ("functional", functional),  # tensorcraft.compiler.functional
]


@dataclass
class WrapperCode:
    """Generated source plus what it needs to run: the names it expects in its namespace."""
    source: str
    namespace: dict[str, Any]
    placeholder_indices: list[int]   # which flat inputs are the function's tensor arguments, in order
    param_names: list[str]           # qualified names of the module tensors passed after them (for people:
    # the pipeline matches them to the captured graph by node, graph.origin)
    kernel_sources: dict[str, str] = field(default_factory=dict)  # kernel node's name -> its source

    def load(self, name: str = "forward") -> Callable[..., tuple]:
        """Execute the source in a fresh namespace and return its function. The source is compiled
        under a file name that shows up in tracebacks, so an error inside generated code points at
        the generated line."""
        namespace = dict(self.namespace)
        exec(compile(self.source, f"<tensorcraft wrapper {name}>", "exec"), namespace)
        return namespace[name]

    def full_source(self) -> str:
        """Wrapper and kernels together, as `debug=True` prints them."""
        parts = [f"# ---- kernel {name} ----\n{src}" for name, src in self.kernel_sources.items()]
        return "\n".join(parts + ["# ---- wrapper ----\n" + self.source])


class SourcePrinter:
    """Turns argument values into Python source, binding what has no literal form in the namespace."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace

    def bind(self, prefix: str, value: Any) -> str:
        for name, existing in self.namespace.items():
            if existing is value and name.startswith(prefix):
                return name
        name = f"{prefix}{sum(1 for n in self.namespace if n.startswith(prefix))}"
        self.namespace[name] = value
        return name

    def value(self, v: Any) -> str:
        if isinstance(v, Node):
            return v.name
        if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
            return repr(v)
        if isinstance(v, float):
            return python_float(v)
        if v is Ellipsis:
            return "..."
        if isinstance(v, torch.dtype) or isinstance(v, (torch.memory_format, torch.layout)):
            return str(v)
        if isinstance(v, torch.device):
            return f"torch.device({str(v)!r})"
        if isinstance(v, torch.Size):
            return f"torch.Size({list(v)!r})"
        if isinstance(v, slice):
            return f"slice({self.value(v.start)}, {self.value(v.stop)}, {self.value(v.step)})"
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            inner = ", ".join(self.value(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if isinstance(v, tuple):  # a namedtuple: its class, called with its fields
            return f"{self.bind('_type', type(v))}({', '.join(self.value(x) for x in v)})"
        if isinstance(v, list):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if type(v) is dict:
            return "{" + ", ".join(f"{self.value(k)}: {self.value(x)}" for k, x in v.items()) + "}"
        if any(isinstance(leaf, Node) for leaf in trees.leaves(v)):  # a structure of values computed here
            raise TypeError(f"cannot write a {type(v).__name__} holding graph values as Python source")
        return self.bind("_const", v)

    def target(self, fn: Any) -> str:
        name = getattr(fn, "__name__", None)
        for path, module in _MODULES:
            if name and getattr(module, name, None) is fn:
                if module is functional:  # any namespace this printer writes into gets the module
                    self.namespace.setdefault("functional", functional)
                return f"{path}.{name}"
        return self.bind("_extern", fn)

    def call(self, node: Node) -> str:
        fn = node.target
        if fn is operator.getitem or fn is torch.Tensor.__getitem__:
            return f"{self.value(node.args[0])}[{self.value(node.args[1])}]"
        if type(fn).__name__ == "method-wrapper" and len(node.args) == 1:  # a Tensor property: x.T
            return f"{self.value(node.args[0])}.{fn.__self__.__name__}"
        args = [self.value(a) for a in node.args] + [f"{k}={self.value(v)}" for k, v in node.kwargs.items()]
        return f"{self.target(fn)}({', '.join(args)})"


def _meta(node: Node) -> str:
    if node.shape is None:
        return ""
    return f"  # {list(node.shape)} {str(node.dtype).replace('torch.', '')}"


@swappable
def generate_wrapper(graph: Graph, plan: MemoryPlan, kernels: dict[Node, CompiledKernel],
                     name: str = "forward") -> WrapperCode:
    """Python source of ``forward(<tensor inputs>, <module tensors>)`` returning the flat outputs.
    ``kernels``: each kernel node's compiled kernel, bound in the namespace (and called) by the node's name."""
    namespace: dict[str, Any] = {"torch": torch, "operator": operator, "functional": functional}
    printer = SourcePrinter(namespace)
    users = graph.users()
    header = [f"# generated by tensorcraft.compiler.codegen.wrapper from a graph of {len(graph)} nodes",
              f"# {plan.summary()}"]
    for i, slot in enumerate(plan.slots):
        header.append(f"_slot{i} = torch.empty({slot.numel}, dtype={slot.dtype}, device={printer.value(slot.device)})")
    placeholders, params = graph.placeholders, graph.params
    signature = ", ".join(n.name for n in placeholders + params)
    body: list[str] = []
    contiguous: set[Node] = set()  # values already made contiguous for a kernel
    for index, node in enumerate(graph.nodes):
        if node.kind in ("placeholder", "param"):
            continue
        if node.kind == "constant":  # a global of the generated code, never rebound inside forward
            value = node.target
            namespace[node.name] = value.contiguous() if isinstance(value, torch.Tensor) else value
            contiguous.add(node)
        elif node.kind == "kernel":
            body += _kernel_lines(node, users[node], plan, printer, kernels, contiguous)
        elif node.kind == "call" and is_kernel_output(node):
            pass  # allocated and written by its kernel's lines
        elif node.kind == "call":
            body.append(f"{node.name} = {printer.call(node)}{_meta(node)}")
        else:  # output
            outs = [printer.value(a) for a in node.args]
            body.append(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        dead = [n.name for n in plan.frees_after.get(index, []) if n.kind == "call"]  # locals of forward
        if dead and node.kind != "output":
            body.append(f"del {', '.join(dead)}")
    source = "\n".join(header) + f"\n\n\ndef {name}({signature}):\n" + "\n".join("    " + line for line in body) + "\n"
    for knode, compiled in kernels.items():
        namespace[knode.name] = compiled
    return WrapperCode(source, namespace, [n.attrs["index"] for n in placeholders], [n.target for n in params],
                       {k.name: getattr(c, "source", "") for k, c in kernels.items()})


def _kernel_lines(node: Node, users: list[Node], plan: MemoryPlan, printer: SourcePrinter,
                  kernels: dict[Node, CompiledKernel], contiguous: set[Node]) -> list[str]:
    kernel: Kernel = node.target
    outputs_by_index = {u.args[1]: u for u in users if u.kind == "call" and u.op == "getitem"}
    again = f" (recomputing {node.attrs['recomputes']})" if node.attrs.get("recomputes") else ""
    lines = [f"# {node.name}: {node.attrs.get('fused', '')}{again}".rstrip()]
    out_names = []
    for i, out in enumerate(kernel.outputs):
        shape = kernel.output_shape(out)
        dtype = f"torch.{kernel.dtype}"
        target = outputs_by_index.get(i)
        var = target.name if target is not None else f"_unused_{node.name}_{i}"
        numel = math.prod(shape)
        if target is not None and target in plan.slot_of:
            lines.append(f"{var} = _slot{plan.slot_of[target]}[:{numel}].view({shape!r})"
                         + "  # reused slot")
        else:
            lines.append(f"{var} = torch.empty({shape!r}, dtype={dtype}, device={printer.value(node.device)})")
        out_names.append(var)
    ins = []
    for arg, buffer in zip(node.args, kernel.inputs):
        if not is_kernel_output(arg) and arg not in contiguous:
            # kernels read dense memory: make each input contiguous once (a no-op when it already is)
            lines.insert(0, f"{arg.name} = {arg.name}.contiguous()")
            contiguous.add(arg)
        if tuple(arg.shape) == tuple(buffer.shape):
            ins.append(arg.name)
        else:  # fewer dims than the iteration space: a view with leading 1s (still contiguous)
            ins.append(f"{arg.name}.reshape({tuple(buffer.shape)!r})")
    lines.append(f"{node.name}({', '.join(ins + out_names)})")
    return lines
