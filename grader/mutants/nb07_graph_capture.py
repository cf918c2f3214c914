"""Known-wrong answers to notebook 07's exercises (capture, input_guard, refusal), each with its hint.

They are written as a learner of the notebook would write them: the notebook's tracer (a
TorchFunctionMode handing every call to the library's GraphBuilder), guard and refusal, each with
one mistake.
"""
import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from tensorcraft.compiler.builder import GraphBuilder, is_inplace
from tensorcraft.compiler.capture import Captured
from tensorcraft.compiler.opnames import canonical_name

from . import mutant, one_mistake

CAPTURE = "nb07_graph_capture.capture"
INPUT_GUARD = "nb07_graph_capture.input_guard"
REFUSAL = "nb07_graph_capture.refusal"


# ---------------------------------------------------------------- capture


def _to_nodes(value, node_for):
    if isinstance(value, torch.Tensor):
        return node_for(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_to_nodes(v, node_for) for v in value)
    if isinstance(value, dict):
        return {k: _to_nodes(v, node_for) for k, v in value.items()}
    return value


class _Tracer(TorchFunctionMode):
    """The notebook's tracer; the class attributes switch on one mistake each."""
    skip_inplace = False        # in-place calls run but are not recorded
    params_as_constants = False  # module tensors baked in as constants
    torch_functions_only = False  # methods, operators and torch.nn.functional calls not recorded
    short_param_names = False   # param nodes named by their attribute (weight), not qualified (fc1.weight)

    def __init__(self, builder, module):
        super().__init__()
        self.builder, self.nodes, self.constants = builder, {}, []
        self.names = {}
        if module is not None:
            for qual, t in [*module.named_buffers(), *module.named_parameters()]:
                self.names[id(t)] = qual.rpartition(".")[2] if self.short_param_names else qual

    def node_for(self, tensor):
        if id(tensor) not in self.nodes:
            if id(tensor) in self.names and not self.params_as_constants:
                self.nodes[id(tensor)] = self.builder.param(tensor, self.names[id(tensor)])
            else:
                self.nodes[id(tensor)] = self.builder.constant(tensor)
                self.constants.append(tensor)
        return self.nodes[id(tensor)]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = canonical_name(func)
        if self.skip_inplace and is_inplace(func, name, kwargs):
            return func(*args, **kwargs)
        if self.torch_functions_only and getattr(torch, getattr(func, "__name__", ""), None) is not func:
            return func(*args, **kwargs)
        result, recorded, updated = self.builder.call(func, _to_nodes(args, self.node_for),
                                                      _to_nodes(kwargs, self.node_for), args, kwargs)
        if updated is not None:
            self.nodes[id(args[0])] = updated
        if isinstance(result, torch.Tensor):
            self.nodes[id(result)] = recorded
        elif isinstance(recorded, tuple):
            for value, node in zip(result, recorded):
                if isinstance(value, torch.Tensor):
                    self.nodes[id(value)] = node
        return result


@one_mistake
def _capture(tracer_class, fn, args=(), kwargs=None, module=None, *, count_tensors_only=False):
    kwargs = kwargs or {}
    builder = GraphBuilder()
    tracer = tracer_class(builder, module)
    flat, _ = pytree.tree_flatten((args, kwargs))
    tensors = [v for v in flat if isinstance(v, torch.Tensor)] if count_tensors_only else flat
    for index, value in enumerate(tensors):
        if isinstance(value, torch.Tensor):
            tracer.nodes[id(value)] = builder.placeholder(value, f"arg{index}", index)
    with tracer:
        result = fn(*args, **kwargs)
    out_flat, out_spec = pytree.tree_flatten(result)
    builder.output([tracer.node_for(v) if isinstance(v, torch.Tensor) else v for v in out_flat], out_spec)
    return Captured(builder.graph, None, result, tracer.constants, [f"arg{i}" for i in range(len(flat))])


class _SkipsInplace(_Tracer):
    skip_inplace = True


class _BakesParameters(_Tracer):
    params_as_constants = True


class _TorchFunctionsOnly(_Tracer):
    torch_functions_only = True


class _ShortNames(_Tracer):
    short_param_names = True


@mutant(CAPTURE, hint="an in-place call (t.relu_(), t += 1, F.relu(t, inplace=True)) changes a value the "
        "program reads afterwards: record it with builder.call like any other call (it records the functional "
        "form) and map the updated tensor, args[0], to the node it returns as `updated`")
def capture_skips_inplace_calls(fn, args=(), kwargs=None, module=None):
    return _capture(_SkipsInplace, fn, args, kwargs, module)


@mutant(CAPTURE, hint="the module's parameters and buffers must be param nodes (builder.param(tensor, "
        "qualified name)), read at every call: a constant bakes in today's weights, and training or "
        "load_state_dict would never reach the compiled code")
def capture_bakes_parameters_in(fn, args=(), kwargs=None, module=None):
    return _capture(_BakesParameters, fn, args, kwargs, module)


@mutant(CAPTURE, hint="a TorchFunctionMode sees every call on tensors, not only torch.* functions: methods "
        "(x.sin()), operators (x * 2, 2 - x) and torch.nn.functional (F.gelu, F.linear) must be recorded too; a "
        "result you did not record becomes a constant, and the graph replays the first call's value")
def capture_records_torch_functions_only(fn, args=(), kwargs=None, module=None):
    return _capture(_TorchFunctionsOnly, fn, args, kwargs, module)


@mutant(CAPTURE, hint="name a param node by the tensor's qualified name, as module.named_parameters() gives it "
        "(fc1.weight), not by its attribute (weight): the runtime reads the tensor by that name at every call, "
        "and two layers both have a 'weight'")
def capture_names_parameters_by_attribute(fn, args=(), kwargs=None, module=None):
    return _capture(_ShortNames, fn, args, kwargs, module)


@mutant(CAPTURE, hint="a placeholder's index is the input's position among ALL the flat inputs, numbers "
        "included: in f(k, x) the tensor x is input 1, not 0; enumerate the flat list and skip the non-tensors "
        "without renumbering, or the compiled code reads k where it wants x")
def capture_numbers_tensor_inputs_only(fn, args=(), kwargs=None, module=None):
    return _capture(_Tracer, fn, args, kwargs, module, count_tensors_only=True)


# ---------------------------------------------------------------- input_guard

_FIELDS = ("type", "shape", "stride", "dtype", "device", "requires_grad")


@one_mistake
def _guard(name, value, remembered, *, skip=(), loose_values=False):
    if remembered[0] == "tensor":
        if not isinstance(value, torch.Tensor):
            return f"input {name}: was a tensor, now a {type(value).__name__}"
        now = (type(value), tuple(value.shape), value.stride(), value.dtype, value.device, value.requires_grad)
        for field, is_, was in zip(_FIELDS, now, remembered[1:]):
            if field == "shape" and "shape" in skip:
                is_, was = len(is_), len(was)  # only the number of dimensions
            elif field in skip:
                continue
            if is_ != was:
                return f"input {name}: {field} {is_} != {was}"
        return None
    if remembered[0] == "value":
        if not loose_values and type(value) is not remembered[1]:
            return f"input {name}: type {type(value).__name__} != {remembered[1].__name__}"
        return None if value == remembered[2] else f"input {name}: value {value!r} != {remembered[2]!r}"
    return None if value is remembered[2] else f"input {name}: another object"


@mutant(INPUT_GUARD, hint="compare the dtype too: code compiled for float32 computes in float32, so a float64 "
        "input needs its own entry (torch.compile recompiles)")
def guard_ignores_dtype(name, value, remembered):
    return _guard(name, value, remembered, skip=("dtype",))


@mutant(INPUT_GUARD, hint="compare the whole shape, not the number of dimensions: sizes are baked into the "
        "compiled code (loop bounds, reshapes), so (5, 3) cannot reuse the entry built for (4, 3)")
def guard_compares_only_the_number_of_dims(name, value, remembered):
    return _guard(name, value, remembered, skip=("shape",))


def _contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


@mutant(INPUT_GUARD, hint="compare the strides themselves, not value.is_contiguous(): a transposed tensor and a "
        "broadcast view (expand, stride 0) are both non-contiguous with other strides, and is_contiguous() "
        "ignores the stride of a size-1 axis, which torch.compile guards too")
def guard_compares_contiguity_only(name, value, remembered):
    if remembered[0] == "tensor" and isinstance(value, torch.Tensor):
        was_contiguous = tuple(remembered[3]) == _contiguous_strides(remembered[2])
        if value.is_contiguous() != was_contiguous:
            return f"input {name}: contiguous {value.is_contiguous()} != {was_contiguous}"
    return _guard(name, value, remembered, skip=("stride",))


@mutant(INPUT_GUARD, hint="compare the strides too: a transposed tensor has the same shape but lays its values "
        "out differently in memory, and compiled code indexes memory with the strides it was built for")
def guard_ignores_strides(name, value, remembered):
    return _guard(name, value, remembered, skip=("stride",))


@mutant(INPUT_GUARD, hint="compare requires_grad: an input that needs gradients runs through autograd (a "
        "different compiled path), so torch.compile recompiles when it changes")
def guard_ignores_requires_grad(name, value, remembered):
    return _guard(name, value, remembered, skip=("requires_grad",))


@mutant(INPUT_GUARD, hint="compare the device: code compiled for the CPU cannot run tensors that live elsewhere")
def guard_ignores_device(name, value, remembered):
    return _guard(name, value, remembered, skip=("device",))


@mutant(INPUT_GUARD, hint="in Python 2 == 2.0 and 1 == True, but x * 2 and x * 2.0 are different programs "
        "(an integer tensor times 2.0 becomes float): compare a plain value's type as well as its value")
def guard_compares_values_with_equality_only(name, value, remembered):
    return _guard(name, value, remembered, loose_values=True)


# ---------------------------------------------------------------- refusal
#
# Order matters where two mutants fail one case alike: the check names the first whose result is the
# learner's. refusal_misses_boolean_masks comes before refusal_forgets_value_dependent_shapes, and the
# public group puts torch.unique (which only the latter gets wrong) before x[x > 0].

_READS_VALUES = {"__bool__", "item", "__int__", "__float__", "__index__", "tolist", "numpy"}
_VALUE_SHAPED = {"nonzero", "unique", "masked_select", "argwhere", "unique_consecutive"}
_RANDOM = {"rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm", "bernoulli", "normal",
           "multinomial"}


@one_mistake
def _refusal(op, args, kwargs, *, reads=_READS_VALUES, shaped=_VALUE_SHAPED, masks=True, extra=(),
             tuples=True, any_dtype=False, random=_RANDOM):
    if op in reads or op in extra:
        return f"data-dependent Python: {op} reads values into Python"
    if op in shaped:
        return f"data-dependent shape: {op}"
    if op in random:
        return f"randomness: {op} draws fresh numbers at every call"
    if masks and op == "getitem" and len(args) > 1:
        index = args[1] if tuples and isinstance(args[1], tuple) else (args[1],)
        if any(isinstance(i, torch.Tensor) and (any_dtype or i.dtype == torch.bool) for i in index):
            return "data-dependent shape: indexing with a boolean mask"
    return None


@mutant(REFUSAL, hint="Tensor.__index__ reads a value into Python too: range(t) and a list indexed by t call it")
def refusal_forgets_index(op, args, kwargs):
    return _refusal(op, args, kwargs, reads=_READS_VALUES - {"__index__"})


@mutant(REFUSAL, hint="`if x.sum() > 0:` reads a value too, through Tensor.__bool__; so do int(t) (__int__ or "
        "__index__) and float(t) (__float__), not only t.item()")
def refusal_only_item(op, args, kwargs):
    return _refusal(op, args, kwargs, reads={"item"})


@mutant(REFUSAL, hint="a boolean mask can be one item of a tuple index, as in x[:, mask]: when args[1] is a "
        "tuple, look at each of its items")
def refusal_misses_masks_inside_a_tuple(op, args, kwargs):
    return _refusal(op, args, kwargs, tuples=False)


@mutant(REFUSAL, hint="x[mask] with a boolean tensor is a getitem whose result's length is the number of "
        "True values: look at getitem's index (args[1]), not only at op names")
def refusal_misses_boolean_masks(op, args, kwargs):
    return _refusal(op, args, kwargs, masks=False)


@mutant(REFUSAL, hint="some results have a shape that depends on the values (nonzero, unique, masked_select, "
        "x[mask]): a graph bakes in the shape of the first call, so refuse them too")
def refusal_forgets_value_dependent_shapes(op, args, kwargs):
    return _refusal(op, args, kwargs, shaped=set(), masks=False)


@mutant(REFUSAL, hint="a shape is not a value: x.shape, x.size(0), x.dim(), len(x) and x.numel() are known "
        "when the graph is captured and guarded afterwards, so a branch on them keeps one graph (Dynamo too)")
def refusal_also_refuses_shape_reads(op, args, kwargs):
    return _refusal(op, args, kwargs, extra={"size", "shape", "dim", "__len__", "numel"})


@mutant(REFUSAL, hint="only a boolean mask makes the result's shape depend on the values: x[idx] with an integer "
        "tensor idx has idx's shape, and Dynamo keeps it in the graph; refuse a tensor index only when its "
        "dtype is torch.bool")
def refusal_refuses_every_tensor_index(op, args, kwargs):
    return _refusal(op, args, kwargs, any_dtype=True)


@mutant(REFUSAL, hint="dropout in eval mode (training=False) draws nothing: it returns its input, and Dynamo keeps "
        "it in the graph; record it (no dropout is among the calls to refuse)")
def refusal_refuses_every_dropout(op, args, kwargs):
    return "dropout" if op == "dropout" else _refusal(op, args, kwargs)


@mutant(REFUSAL, hint="a call that draws random numbers (rand_like, randn, bernoulli...) must be refused too: "
        "recorded, its graph is replayed instead of drawing as eager does, and CSE merges two identical draws "
        "into one (x + rand_like(x) - rand_like(x) returns x)")
def refusal_records_random_draws(op, args, kwargs):
    return _refusal(op, args, kwargs, random=set())
