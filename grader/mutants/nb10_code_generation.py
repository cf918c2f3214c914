"""Known-wrong answers to notebook 10's exercises (python_source, c_source, generate_wrapper).

Each is the library's own stage with one mistake, as a learner might make it: a patch of its source
(``grader.mutants.patched``), so that the library stays the one copy of the right answer. The C
mistakes are edits of the library's printer (``c._Printer``); the library collapses the loops and
prints a flat loop when no input broadcasts, so a mistake in reading broadcast inputs is an edit of
the broadcast loop's row offsets, and a mistake in every input's offsets or in the loop bounds an
edit of the flat loop, where the check's first group (inputs of the kernel's full shape) finds it.
"""
from tensorcraft.compiler.codegen.c import _Printer, c_source
from tensorcraft.compiler.codegen.python import python_source
from tensorcraft.compiler.codegen.wrapper import _kernel_lines, generate_wrapper

from . import patched

PYTHON_SOURCE = "nb10_code_generation.python_source"
C_SOURCE = "nb10_code_generation.c_source"
GENERATE_WRAPPER = "nb10_code_generation.generate_wrapper"


# ---------------------------------------------------------------- python_source

def _python(name, *edits, hint):
    patched(PYTHON_SOURCE, name, python_source, *edits, hint=hint)


_python("python_rebinds_outputs", ('f"    {o.name}.copy_({o.value})"', 'f"    {o.name} = {o.value}"'),
        ('f"    {o.name}.copy_({REDUCTION_SOURCE', 'f"    {o.name} = ({REDUCTION_SOURCE'),
        hint="`out = value` only rebinds the local name: the caller's buffer is never written. "
        "Write into the buffer the wrapper allocated: `out.copy_(value)`")

_python("python_outputs_first", ("params = [b.name for b in kernel.inputs] + [o.name for o in kernel.outputs]",
                                 "params = [o.name for o in kernel.outputs] + [b.name for b in kernel.inputs]"),
        hint="the calling convention is run(*inputs, *outputs): inputs first, in the order of "
        "kernel.inputs, then the outputs in the order of kernel.outputs")

_python("python_float32_constants", (", dtype={dtype}, device={device}.device)", ", device={device}.device)"),
        hint="torch.full without dtype= makes a float32 constant: in a float64 kernel 1/3 and 0.1 "
        "are then rounded to float32. Give each constant the kernel's dtype: dtype=torch.<kernel.dtype>")

_python("python_repr_constants", ("{python_float(s.args[0])}", "{s.args[0]!r}"),
        hint="repr(float('inf')) is `inf`, which Python reads as an undefined name (and "
        "repr(nan) is `nan`): print infinities as float('inf') / -float('inf') and NaN as float('nan')")

_python("python_reduction_drops_axis", ("dim=-1, keepdim=True))", "dim=-1))"),
        hint="a reduced output keeps the reduced axis with length 1 (kernel.output_shape): "
        "reduce with keepdim=True")


# ---------------------------------------------------------------- c_source
#
# The edited printer is a class of its own; it takes the statements' walk that it inherits
# (KernelPrinter.statements, which the check makes a tripwire for the learner's code) when the
# mutants are built, before any check runs.

PRINTER = "UNARY, BINARY = _UNARY_C, _BINARY_C"
PINNED = (_Printer, PRINTER, PRINTER + "\n    statements = KernelPrinter.statements")
FLAT_LOOP = 'f"for (int64_t i = 0; i < {self.layout.numel}; i++) {{", *_indent_c(body), "}"]'


def _c(name, *edits, hint, pinned=True):
    patched(C_SOURCE, name, c_source, *((PINNED,) if pinned else ()), *edits, hint=hint)


_c("c_repr_constants", (_Printer, "return c_float(value, self.dtype)",
                        "return f\"{value!r}{'f' if self.dtype == torch.float32 else ''}\""),
   hint="repr(float('inf')) is `inf`, which is not C: print infinities as INFINITY / -INFINITY "
   "and NaN as NAN (from math.h)")

_c("c_ignores_broadcasting",
   (_Printer, "for name, strides in self.layout.strides.items():",
    "for name, strides in {n: tuple(math.prod(self.layout.sizes[e + 1:]) for e in range(len(self.layout.sizes)))\n"
    "                              for n in self.layout.strides}.items():"),
   (_Printer, "'j' if self.layout.strides[b.name][-1] else '0'", "'j'"),
   hint="a broadcast input is smaller than the kernel's iteration space: read it with its own "
   "strides, and stride 0 along each axis where it has size 1 (you read every input at the output's offset)")

_c("c_strides_of_the_output",
   (_Printer, 'terms[name].append(f"{idx} * {strides[d]}" if strides[d] != 1 else idx)',
    'terms[name].append(f"{idx} * {math.prod(self.layout.sizes[d + 1:])}")'),
   hint="you skip the axes where the input has size 1, good, but the strides must be the input's "
   "own: along axis d, the product of the input's sizes after d (not the kernel's sizes)")

_c("c_column_major",
   (_Printer, 'f"{self.ptr[b.name]}[i]"',
    'f"{self.ptr[b.name]}[" + (" + ".join(f"(i / {math.prod(self.k.shape[d + 1:])} % {n}) * '
    '{math.prod(self.k.shape[:d])}" for d, n in enumerate(self.k.shape)) or "0") + "]"'),
   hint="torch tensors are row-major: the last axis has stride 1 and the first the largest "
   "stride; accumulate the strides from the last axis backwards")

_c("c_loop_bound_off_by_one",
   (_Printer, FLAT_LOOP,
    'f"for (int64_t i = 0; i < {self.layout.numel}; i++) {{", "if (" + " && ".join(['
    'f"i / {math.prod(self.k.shape[d + 1:])} % {n} < {n} - 1" for d, n in enumerate(self.k.shape)] or ["1"]) '
    '+ ") {", *_indent_c(body), "}", "}"]'),
   hint="off by one: `i < n - 1` stops before the last index of each axis, so the last row and "
   "column are never written; a loop over n values is `for (i = 0; i < n; i++)`")

_c("c_inlines_without_parentheses",
   (_Printer, PRINTER, PRINTER + "\n\n    def statements(self, load, width=''):\n"
    "        for s in self.k.stmts:\n            self.var[s.name] = self.expression(s, load, width)\n"
    "        return []"),
   (_Printer, 'stores = [f"{ptr}[{out_index}]', 'inline = self.statements(load)\n        stores = [f"{ptr}[{out_index}]'),
   (_Printer, "return self.statements(load) + stores", "return inline + stores"),
   pinned=False,
   hint="pasting operand expressions into an operator's spelling loses the grouping: mul(add(x, c), y) "
   "printed as `x + c * y` is x + (c * y) in C. Give each statement its own variable (or parenthesise "
   "every operand)")


# ---------------------------------------------------------------- generate_wrapper

FREES = 'if dead and node.kind != "output":\n            body.append(f"del {\', \'.join(dead)}")'
RETURNED = "outs = [printer.value(a) for a in node.args]"


def _wrapper(name, *edits, hint):
    patched(GENERATE_WRAPPER, name, generate_wrapper, *edits, hint=hint)


_wrapper("wrapper_never_frees", ('if dead and node.kind != "output":', "if False:"),
         hint="every intermediate must be deleted (`del name`) right after its last use, as "
         "plan.frees_after lists them: a local of forward otherwise keeps its memory until forward returns")

_wrapper("wrapper_frees_at_the_end", ("body: list[str] = []", "body: list[str] = []\n    deferred: list[str] = []"),
         (FREES, 'if dead and node.kind != "output":\n            deferred += dead'),
         (RETURNED, RETURNED + "\n            if deferred:\n                body.append(f\"del {', '.join(deferred)}\")"),
         hint="deleting everything just before `return` frees nothing early: the peak memory is "
         "that of keeping every intermediate. Delete each value after node i = its last use (plan.frees_after[i])")

_wrapper("wrapper_passes_views", (_kernel_lines, "if not is_kernel_output(arg) and arg not in contiguous:", "if False:"),
         hint="a kernel reads dense memory: pass every input as `<name>.contiguous()` (a transposed "
         "input is a view with other strides; .contiguous() copies it only when it must)")

_wrapper("wrapper_keeps_input_shapes", (_kernel_lines, "if tuple(arg.shape) == tuple(buffer.shape):", "if True:"),
         hint="a kernel's input has the rank of its iteration space (a bias [8] is the buffer "
         "[1, 8]): reshape each input to its buffer's shape, `.reshape(buffer.shape)`")

_wrapper("wrapper_returns_only_the_first", (RETURNED, RETURNED + "[:1]"),
         hint="return every value the output node lists, in its order: the caller unpacks them")

_wrapper("wrapper_ignores_the_slots", (_kernel_lines, "if target is not None and target in plan.slot_of:", "if False:"),
         hint="a value in plan.slot_of lives in its slot: assign it "
         "`_slot<k>[:<numel>].view(<shape>)`, with `_slot<k>` allocated once before `def`; a torch.empty at every "
         "call throws away the reuse the memory plan found")

_wrapper("wrapper_allocates_on_the_cpu",
         (_kernel_lines, "device={printer.value(node.device)})", "device={printer.value(torch.device('cpu'))})"),
         hint="a kernel's output buffer is allocated on the CPU whatever the inputs' device: "
         "allocate it on the kernel node's device (node.device), as the inputs are, or a GPU model computes into "
         "CPU memory")
