"""Known-wrong answers to notebook 10's exercises (python_source, c_source, generate_wrapper).

Each is the notebook's solution, written as a learner would write it with the tables and helpers
the notebook gives (the C spellings are copied here from the notebook), with one mistake.
"""
import math
import operator

import torch

from tensorcraft.compiler.codegen.literals import c_float, python_float
from tensorcraft.compiler.codegen.python import BINARY_SOURCE, REDUCTION_SOURCE, UNARY_SOURCE
from tensorcraft.compiler.codegen.wrapper import SourcePrinter, WrapperCode
from tensorcraft.compiler.passes.memory_plan import is_kernel_output

from . import mutant, one_mistake

PYTHON_SOURCE = "nb10_code_generation.python_source"
C_SOURCE = "nb10_code_generation.c_source"
GENERATE_WRAPPER = "nb10_code_generation.generate_wrapper"

TORCH_OPS = {**UNARY_SOURCE, **BINARY_SOURCE}


# ---------------------------------------------------------------- python_source

@one_mistake
def _python_source(kernel, *, outputs_first=False, typed_constants=True, store="copy", keepdim=True,
                   expand=True, literal=python_float):
    inputs = [b.name for b in kernel.inputs]
    outputs = [o.name for o in kernel.outputs]
    params = outputs + inputs if outputs_first else inputs + outputs
    lines = [f"def {kernel.name}({', '.join(params)}):"]
    for s in kernel.stmts:
        if s.op == "load":
            value = s.args[0]
        elif s.op == "const":
            dtype = f", dtype=torch.{kernel.dtype}" if typed_constants else ""
            value = f"torch.full((), {literal(s.args[0])}{dtype}, device={outputs[0]}.device)"
        else:
            value = TORCH_OPS[s.op].format(*s.args)
        lines.append(f"    {s.name} = {value}")
    for o in kernel.outputs:
        value = o.value
        if o.reduce is not None:
            full = f"{o.value}.expand({tuple(kernel.shape)})" if expand else o.value
            value = f"{REDUCTION_SOURCE[o.reduce]}({full}, dim=-1{', keepdim=True' if keepdim else ''})"
        lines.append(f"    {o.name}.copy_({value})" if store == "copy" else f"    {o.name} = {value}")
    return "\n".join(lines) + "\n"


@mutant(PYTHON_SOURCE, hint="`out = value` only rebinds the local name: the caller's buffer is never written. "
        "Write into the buffer the wrapper allocated: `out.copy_(value)`")
def python_rebinds_outputs(kernel):
    return _python_source(kernel, store="assign")


@mutant(PYTHON_SOURCE, hint="the calling convention is run(*inputs, *outputs): inputs first, in the order of "
        "kernel.inputs, then the outputs in the order of kernel.outputs")
def python_outputs_first(kernel):
    return _python_source(kernel, outputs_first=True)


@mutant(PYTHON_SOURCE, hint="torch.full without dtype= makes a float32 constant: in a float64 kernel 1/3 and 0.1 "
        "are then rounded to float32. Give each constant the kernel's dtype: dtype=torch.<kernel.dtype>")
def python_float32_constants(kernel):
    return _python_source(kernel, typed_constants=False)


@mutant(PYTHON_SOURCE, hint="repr(float('inf')) is `inf`, which Python reads as an undefined name (and "
        "repr(nan) is `nan`): print infinities as float('inf') / -float('inf') and NaN as float('nan')")
def python_repr_constants(kernel):
    return _python_source(kernel, literal=repr)


@mutant(PYTHON_SOURCE, hint="a reduced output keeps the reduced axis with length 1 (kernel.output_shape): "
        "reduce with keepdim=True")
def python_reduction_drops_axis(kernel):
    return _python_source(kernel, keepdim=False)


# ---------------------------------------------------------------- c_source

C_TYPES = {"float32": "float", "float64": "double"}
C_OPS = {
    "neg": "-{a}", "abs": "fabs{f}({a})", "exp": "exp{f}({a})", "log": "log{f}({a})",
    "sqrt": "sqrt{f}({a})", "rsqrt": "1 / sqrt{f}({a})", "sin": "sin{f}({a})", "cos": "cos{f}({a})",
    "tanh": "tanh{f}({a})", "sigmoid": "1 / (1 + exp{f}(-{a}))",
    "relu": "({a} > 0 || {a} != {a}) ? {a} : 0",
    "gelu": "(0.5{f} * {a}) * (1 + erf{f}({a} * 0.7071067811865476{f}))",
    "silu": "{a} / (1 + exp{f}(-{a}))", "erf": "erf{f}({a})", "reciprocal": "1 / {a}",
    "add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
    "maximum": "({a} > {b} || {a} != {a}) ? {a} : {b}", "minimum": "({a} < {b} || {a} != {a}) ? {a} : {b}",
    "pow": "pow{f}({a}, {b})",
}


def element_offset(buffer_shape, shape):
    """The notebook's solution: the buffer's own contiguous strides, 0 where it has size 1."""
    terms, stride = [], 1
    for d in reversed(range(len(shape))):
        if buffer_shape[d] != 1:
            terms.append(f"i{d}" if stride == 1 else f"i{d} * {stride}")
        stride *= buffer_shape[d]
    return " + ".join(reversed(terms)) or "0"


def offset_of_the_iteration_space(buffer_shape, shape):
    """Every buffer read as if it had the kernel's full shape."""
    return element_offset(shape, shape)


def offset_with_the_outputs_strides(buffer_shape, shape):
    """Broadcast dims skipped, but the strides are the full shape's, not the buffer's own."""
    terms, stride = [], 1
    for d in reversed(range(len(shape))):
        if buffer_shape[d] != 1:
            terms.append(f"i{d} * {stride}")
        stride *= shape[d]
    return " + ".join(reversed(terms)) or "0"


def offset_column_major(buffer_shape, shape):
    """Strides accumulated from the first axis: the layout of Fortran, not of torch."""
    terms, stride = [], 1
    for d in range(len(shape)):
        if buffer_shape[d] != 1:
            terms.append(f"i{d} * {stride}")
        stride *= buffer_shape[d]
    return " + ".join(terms) or "0"


@one_mistake
def _c_source(kernel, *, offset=element_offset, bound=lambda n: str(n), inline=False, literal=c_float):
    if any(o.reduce for o in kernel.outputs):
        raise ValueError(f"kernel {kernel.name} reduces: this c_source writes pointwise kernels only")
    t = C_TYPES[kernel.dtype]
    f = "f" if t == "float" else ""
    dtype = getattr(torch, kernel.dtype)
    params = [f"const {t} *in_{b.name}" for b in kernel.inputs] + [f"{t} *out_{o.name}" for o in kernel.outputs]
    lines = ["#include <math.h>", "#include <stdint.h>", "",
             f"void kernel_{kernel.name}({', '.join(params)}, int n_threads) {{"]
    pad = "    "
    for d, n in enumerate(kernel.shape):
        if d == 0:
            lines.append("#pragma omp parallel for num_threads(n_threads)")
        lines.append(f"{pad}for (int64_t i{d} = 0; i{d} < {bound(n)}; i{d}++) {{")
        pad += "    "
    shapes = {b.name: b.shape for b in kernel.inputs}
    text = {}
    for s in kernel.stmts:
        if s.op == "load":
            value = f"in_{s.args[0]}[{offset(shapes[s.args[0]], kernel.shape)}]"
        elif s.op == "const":
            value = literal(s.args[0], dtype)
        else:
            names = [text[a] if inline else f"v_{a}" for a in s.args]
            value = C_OPS[s.op].format(a=names[0], b=names[-1], f=f)
        text[s.name] = value
        if not inline:
            lines.append(f"{pad}const {t} v_{s.name} = {value};")
    here = element_offset(kernel.shape, kernel.shape)
    for o in kernel.outputs:
        lines.append(f"{pad}out_{o.name}[{here}] = {text[o.value] if inline else 'v_' + o.value};")
    for _ in kernel.shape:
        pad = pad[4:]
        lines.append(f"{pad}}}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _c_repr(value, dtype):
    return f"{value!r}{'f' if dtype == torch.float32 else ''}"


@mutant(C_SOURCE, hint="repr(float('inf')) is `inf`, which is not C: print infinities as INFINITY / -INFINITY "
        "and NaN as NAN (from math.h)")
def c_repr_constants(kernel):
    return _c_source(kernel, literal=_c_repr)


@mutant(C_SOURCE, hint="a broadcast input is smaller than the kernel's iteration space: read it with its own "
        "strides, and stride 0 along each axis where it has size 1 (you read every input at the output's offset)")
def c_ignores_broadcasting(kernel):
    return _c_source(kernel, offset=offset_of_the_iteration_space)


@mutant(C_SOURCE, hint="you skip the axes where the input has size 1, good, but the strides must be the input's "
        "own: along axis d, the product of the input's sizes after d (not the kernel's sizes)")
def c_strides_of_the_output(kernel):
    return _c_source(kernel, offset=offset_with_the_outputs_strides)


@mutant(C_SOURCE, hint="torch tensors are row-major: the last axis has stride 1 and the first the largest "
        "stride; accumulate the strides from the last axis backwards")
def c_column_major(kernel):
    return _c_source(kernel, offset=offset_column_major)


@mutant(C_SOURCE, hint="off by one: `i < n - 1` stops before the last index of each axis, so the last row and "
        "column are never written; a loop over n values is `for (i = 0; i < n; i++)`")
def c_loop_bound_off_by_one(kernel):
    return _c_source(kernel, bound=lambda n: f"{n} - 1")


@mutant(C_SOURCE, hint="pasting operand expressions into an operator's spelling loses the grouping: mul(add(x, c), y) "
        "printed as `x + c * y` is x + (c * y) in C. Give each statement its own variable (or parenthesise "
        "every operand)")
def c_inlines_without_parentheses(kernel):
    return _c_source(kernel, inline=True)


# ---------------------------------------------------------------- generate_wrapper

@one_mistake
def _generate_wrapper(graph, plan, kernels, name="forward", *, frees="after", contiguous=True, reshape=True,
                      returned=None, slots=True, device_of=lambda node: node.device):
    namespace = {"torch": torch, "operator": operator, **{node.name: compiled for node, compiled in kernels.items()}}
    printer = SourcePrinter(namespace)
    users = graph.users()
    header = [f"_slot{i} = torch.empty({s.numel}, dtype={s.dtype}, device={printer.value(s.device)})"
              for i, s in enumerate(plan.slots)]
    body, deferred = [], []
    for index, node in enumerate(graph.nodes):
        if node.kind in ("placeholder", "param"):
            continue
        if node.kind == "constant":
            value = node.target
            namespace[node.name] = value.contiguous() if isinstance(value, torch.Tensor) else value
        elif node.kind == "kernel":
            kernel = node.target
            outputs = {u.args[1]: u for u in users[node] if is_kernel_output(u)}
            names = []
            for i, out in enumerate(kernel.outputs):
                shape = kernel.output_shape(out)
                target = outputs.get(i)
                var = target.name if target is not None else f"_unused_{node.name}_{i}"
                if slots and target in plan.slot_of:
                    body.append(f"{var} = _slot{plan.slot_of[target]}[:{math.prod(shape)}].view({shape})")
                else:
                    body.append(f"{var} = torch.empty({shape}, dtype=torch.{kernel.dtype}, "
                                f"device={printer.value(device_of(node))})")
                names.append(var)
            args = []
            for arg, buffer in zip(node.args, kernel.inputs):
                text = f"{arg.name}.contiguous()" if contiguous else arg.name
                args.append(f"{text}.reshape({tuple(buffer.shape)})" if reshape else text)
            body.append(f"{node.name}({', '.join(args + names)})")
        elif is_kernel_output(node):
            pass
        elif node.kind == "call":
            body.append(f"{node.name} = {printer.call(node)}")
        else:
            values = [printer.value(a) for a in node.args]
            if returned is not None:
                values = returned(values)
            if deferred:
                body.append(f"del {', '.join(deferred)}")
            body.append(f"return ({''.join(v + ', ' for v in values)})")
        dead = [n.name for n in plan.frees_after.get(index, []) if n.kind == "call"]
        if dead and frees == "after":
            body.append(f"del {', '.join(dead)}")
        elif frees == "at the end":
            deferred += dead
    inputs = graph.placeholders + graph.params
    source = "\n".join(header) + f"\n\ndef {name}({', '.join(n.name for n in inputs)}):\n" + \
        "\n".join("    " + line for line in body) + "\n"
    return WrapperCode(source, namespace, [n.attrs["index"] for n in graph.placeholders],
                       [n.target for n in graph.params])


@mutant(GENERATE_WRAPPER, hint="every intermediate must be deleted (`del name`) right after its last use, as "
        "plan.frees_after lists them: a local of forward otherwise keeps its memory until forward returns")
def wrapper_never_frees(graph, plan, kernels, name="forward"):
    return _generate_wrapper(graph, plan, kernels, name, frees="never")


@mutant(GENERATE_WRAPPER, hint="deleting everything just before `return` frees nothing early: the peak memory is "
        "that of keeping every intermediate. Delete each value after node i = its last use (plan.frees_after[i])")
def wrapper_frees_at_the_end(graph, plan, kernels, name="forward"):
    return _generate_wrapper(graph, plan, kernels, name, frees="at the end")


@mutant(GENERATE_WRAPPER, hint="a kernel reads dense memory: pass every input as `<name>.contiguous()` (a transposed "
        "input is a view with other strides; .contiguous() copies it only when it must)")
def wrapper_passes_views(graph, plan, kernels, name="forward"):
    return _generate_wrapper(graph, plan, kernels, name, contiguous=False)


@mutant(GENERATE_WRAPPER, hint="a kernel's input has the rank of its iteration space (a bias [8] is the buffer "
        "[1, 8]): reshape each input to its buffer's shape, `.reshape(buffer.shape)`")
def wrapper_keeps_input_shapes(graph, plan, kernels, name="forward"):
    return _generate_wrapper(graph, plan, kernels, name, reshape=False)


@mutant(GENERATE_WRAPPER, hint="return every value the output node lists, in its order: the caller unpacks them")
def wrapper_returns_only_the_first(graph, plan, kernels, name="forward"):
    return _generate_wrapper(graph, plan, kernels, name, returned=lambda values: values[:1])


@mutant(GENERATE_WRAPPER, hint="a value in plan.slot_of lives in its slot: assign it "
        "`_slot<k>[:<numel>].view(<shape>)`, with `_slot<k>` allocated once before `def`; a torch.empty at every "
        "call throws away the reuse the memory plan found")
def wrapper_ignores_the_slots(graph, plan, kernels, name="forward"):
    return _generate_wrapper(graph, plan, kernels, name, slots=False)


@mutant(GENERATE_WRAPPER, hint="a kernel's output buffer is allocated on the CPU whatever the inputs' device: "
        "allocate it on the kernel node's device (node.device), as the inputs are, or a GPU model computes into "
        "CPU memory")
def wrapper_allocates_on_the_cpu(graph, plan, kernels, name="forward"):
    return _generate_wrapper(graph, plan, kernels, name, device_of=lambda node: torch.device("cpu"))
