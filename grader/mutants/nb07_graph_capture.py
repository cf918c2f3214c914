"""Known-wrong answers to notebook 07's exercises (capture, input_guard, refusal), each with its hint.

Each is the library's own stage with one rule changed, as a learner might get it wrong: a patch of its
source (``grader.mutants.patched``), so that the library stays the one copy of the right answer.
capture's mistakes are edits of its recorder (``_Recorder``, the TorchFunctionMode that hands every
call to the GraphBuilder, as the notebook's Tracer does); input_guard's of ``check_input`` and the
comparison it calls; refusal's of the library's ``refusal``.
"""
from tensorcraft.compiler.capture import _Recorder, capture
from tensorcraft.compiler.guards.inputs import _input_matches, check_input
from tensorcraft.compiler.opnames import refusal

from . import patched

CAPTURE = "nb07_graph_capture.capture"
INPUT_GUARD = "nb07_graph_capture.input_guard"
REFUSAL = "nb07_graph_capture.refusal"


# ---------------------------------------------------------------- capture

NAMED = "name = opnames.canonical_name(func)"

patched(CAPTURE, "capture_skips_inplace_calls", capture,
        (_Recorder, NAMED, NAMED + "\n        from .builder import is_inplace\n"
         "        if is_inplace(func, name, kwargs):\n            return func(*args, **kwargs)"),
        hint="an in-place call (t.relu_(), t += 1, F.relu(t, inplace=True)) changes a value the "
        "program reads afterwards: record it with builder.call like any other call (it records the functional "
        "form) and map the updated tensor, args[0], to the node it returns as `updated`")

patched(CAPTURE, "capture_bakes_parameters_in", capture,
        (_Recorder, "qual = self.module_names.get(id(tensor))", "qual = None"),
        hint="the module's parameters and buffers must be param nodes (builder.param(tensor, "
        "qualified name)), read at every call: a constant bakes in today's weights, and training or "
        "load_state_dict would never reach the compiled code")

patched(CAPTURE, "capture_records_torch_functions_only", capture,
        (_Recorder, NAMED, NAMED + "\n        if getattr(torch, getattr(func, '__name__', ''), None) is not func:\n"
         "            return func(*args, **kwargs)"),
        hint="a TorchFunctionMode sees every call on tensors, not only torch.* functions: methods "
        "(x.sin()), operators (x * 2, 2 - x) and torch.nn.functional (F.gelu, F.linear) must be recorded too; a "
        "result you did not record becomes a constant, and the graph replays the first call's value")

patched(CAPTURE, "capture_names_parameters_by_attribute", capture,
        (_Recorder, "self.module_names = _module_tensors(module)",
         "self.module_names = {i: qual.rpartition('.')[2] for i, qual in _module_tensors(module).items()}"),
        hint="name a param node by the tensor's qualified name, as module.named_parameters() gives it "
        "(fc1.weight), not by its attribute (weight): the runtime reads the tensor by that name at every call, "
        "and two layers both have a 'weight'")

patched(CAPTURE, "capture_numbers_tensor_inputs_only", capture,
        ("enumerate(zip(flat, names))", "enumerate([(v, n) for v, n in zip(flat, names) if isinstance(v, torch.Tensor)])"),
        hint="a placeholder's index is the input's position among ALL the flat inputs, numbers "
        "included: in f(k, x) the tensor x is input 1, not 0; enumerate the flat list and skip the non-tensors "
        "without renumbering, or the compiled code reads k where it wants x")


# ---------------------------------------------------------------- input_guard
#
# A remembered tensor is ('tensor', type, shape, stride, dtype, device, requires_grad): a mistake that
# ignores one field compares the two descriptions without it.

WHOLE = "return got == expected"


def _guarding(name, *edits, hint):
    patched(INPUT_GUARD, name, check_input, *edits, hint=hint)


def _without(field: int) -> tuple:
    return (_input_matches, WHOLE, f"return got[:{field}] + got[{field + 1}:] == expected[:{field}] + expected[{field + 1}:]")


_guarding("guard_ignores_dtype", _without(4),
          hint="compare the dtype too: code compiled for float32 computes in float32, so a float64 "
          "input needs its own entry (torch.compile recompiles)")

_guarding("guard_compares_only_the_number_of_dims",
          (_input_matches, WHOLE, "return (*got[:2], len(got[2]), *got[3:]) == (*expected[:2], len(expected[2]), *expected[3:])"),
          hint="compare the whole shape, not the number of dimensions: sizes are baked into the "
          "compiled code (loop bounds, reshapes), so (5, 3) cannot reuse the entry built for (4, 3)")

_guarding("guard_compares_contiguity_only",
          ("got = describe_input(value)",
           "got = describe_input(value)\n    if got[0] == remembered[0] == 'tensor' and value.is_contiguous() == "
           "(tuple(remembered[3]) == torch.empty(remembered[2]).stride()):\n"
           "        got = got._replace(stride=remembered[3])"),
          hint="compare the strides themselves, not value.is_contiguous(): a transposed tensor and a "
          "broadcast view (expand, stride 0) are both non-contiguous with other strides, and is_contiguous() "
          "ignores the stride of a size-1 axis, which torch.compile guards too")

_guarding("guard_ignores_strides", _without(3),
          hint="compare the strides too: a transposed tensor has the same shape but lays its values "
          "out differently in memory, and compiled code indexes memory with the strides it was built for")

_guarding("guard_ignores_requires_grad", _without(6),
          hint="compare requires_grad: an input that needs gradients runs through autograd (a "
          "different compiled path), so torch.compile recompiles when it changes")

_guarding("guard_ignores_device", _without(5),
          hint="compare the device: code compiled for the CPU cannot run tensors that live elsewhere")

_guarding("guard_compares_values_with_equality_only",
          (_input_matches, "got[1] is not expected[1]:", "got[1] is not expected[1] and got[0] != 'value':"),
          (_input_matches, "return same(got[2], expected[2])", "return got[2] == expected[2]"),
          hint="in Python 2 == 2.0 and 1 == True, but x * 2 and x * 2.0 are different programs "
          "(an integer tensor times 2.0 becomes float): compare a plain value's type as well as its value")


# ---------------------------------------------------------------- refusal
#
# Order matters where two mutants fail one case alike: the check names the first whose result is the
# learner's. refusal_misses_boolean_masks comes before refusal_forgets_value_dependent_shapes, and the
# public group puts torch.unique (which only the latter gets wrong) before x[x > 0].

READS = "if name in DATA_DEPENDENT:"
MASKS = 'if name == "getitem" and len(args) > 1:'


def _refusing(name, *edits, hint):
    patched(REFUSAL, name, refusal, *edits, hint=hint)


_refusing("refusal_forgets_index", (READS, 'if name in DATA_DEPENDENT - {"__index__"}:'),
          hint="Tensor.__index__ reads a value into Python too: range(t) and a list indexed by t call it")

_refusing("refusal_only_item", (READS, 'if name == "item":'),
          hint="`if x.sum() > 0:` reads a value too, through Tensor.__bool__; so do int(t) (__int__ or "
          "__index__) and float(t) (__float__), not only t.item()")

_refusing("refusal_misses_masks_inside_a_tuple",
          ("index = args[1] if isinstance(args[1], tuple) else (args[1],)", "index = (args[1],)"),
          hint="a boolean mask can be one item of a tuple index, as in x[:, mask]: when args[1] is a "
          "tuple, look at each of its items")

_refusing("refusal_misses_boolean_masks", (MASKS, "if False:"),
          hint="x[mask] with a boolean tensor is a getitem whose result's length is the number of "
          "True values: look at getitem's index (args[1]), not only at op names")

_refusing("refusal_forgets_value_dependent_shapes", ("if name in DATA_DEPENDENT_SHAPE:", "if False:"), (MASKS, "if False:"),
          hint="some results have a shape that depends on the values (nonzero, unique, masked_select, "
          "x[mask]): a graph bakes in the shape of the first call, so refuse them too")

_refusing("refusal_also_refuses_shape_reads",
          (READS, 'if name in DATA_DEPENDENT | {"size", "shape", "dim", "__len__", "numel"}:'),
          hint="a shape is not a value: x.shape, x.size(0), x.dim(), len(x) and x.numel() are known "
          "when the graph is captured and guarded afterwards, so a branch on them keeps one graph (Dynamo too)")

_refusing("refusal_refuses_every_tensor_index", (" and i.dtype == torch.bool", ""),
          hint="only a boolean mask makes the result's shape depend on the values: x[idx] with an integer "
          "tensor idx has idx's shape, and Dynamo keeps it in the graph; refuse a tensor index only when its "
          "dtype is torch.bool")

_refusing("refusal_refuses_every_dropout", ("if training and p > 0:", "if True:"),
          hint="dropout in eval mode (training=False) draws nothing: it returns its input, and Dynamo keeps "
          "it in the graph; record it (no dropout is among the calls to refuse)")

_refusing("refusal_records_random_draws", ("if name in RANDOM:", "if False:"),
          hint="a call that draws random numbers (rand_like, randn, bernoulli...) must be refused too: "
          "recorded, its graph is replayed instead of drawing as eager does, and CSE merges two identical draws "
          "into one (x + rand_like(x) - rand_like(x) returns x)")
