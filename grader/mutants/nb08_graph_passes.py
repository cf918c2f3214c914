"""Known-wrong answers to notebook 08's exercises (DCE, CSE, constant folding, the conv+batchnorm arithmetic).

Written as a learner of the notebook would write them, on the graph methods the notebook shows
(``graph.copy``, ``graph.users``, ``graph.remove``, ``graph.replace``, ``graph.replace_all_uses``,
``graph.constant``, ``returned_storages``), each with one mistake. A mistake in a rule of the library's
own pass is a patch of its source (``grader.mutants.patched``): the library is the one copy of the
right pass.
"""
import torch

import tensorcraft.compiler.passes.dce as _dce
from tensorcraft.compiler.ir import Node
from tensorcraft.compiler.passes.constant_folding import fold_constants
from tensorcraft.compiler.passes.cse import _key as _cse_key, eliminate_common_subexpressions
from tensorcraft.compiler.passes.dce import eliminate_dead_code

from . import mutant, patched

DCE = "nb08_graph_passes.eliminate_dead_code"
CSE = "nb08_graph_passes.eliminate_common_subexpressions"
FOLD = "nb08_graph_passes.fold_constants"
FOLD_CONV_BN = "nb08_graph_passes.fold_conv_bn"

# ---------------------------------------------------------------- dead-code elimination


_KEPT = {"dce": _dce.eliminate_dead_code.library}  # kept before the check ran, under a name of its own


@mutant(DCE, hint="the library's own eliminate_dead_code is forbidden under any name, even kept in a dict: "
        "write the pass yourself")
def dce_by_kept_library(graph):
    return _KEPT["dce"](graph)


patched(DCE, "dce_keeps_constants_and_parameters", eliminate_dead_code,
        ('if node.kind in ("output", "placeholder") or', 'if node.kind in ("output", "placeholder", "constant", "param") or'),
        hint="a constant or a parameter that only dead code reads is dead too: remove every node that is "
        "not live, not only calls (the compiled code would still hold it, and fetch a parameter at every call)")


@mutant(DCE, hint="one sweep over 'nodes nobody reads' removes only the end of a dead chain: the nodes it read "
        "become dead only once it is gone; walk from the output backwards, marking what live nodes read")
def dce_one_sweep(graph):
    graph = graph.copy()
    users = graph.users()
    graph.remove([n for n in graph.nodes if n.kind not in ("output", "placeholder") and not users[n]])
    return graph


@mutant(DCE, hint="the output node is read by no node, yet it is what the function returns: it has an effect "
        "(handing values to the caller), like an in-place update; it is always live, and so is what it reads")
def dce_removes_the_output(graph):
    graph = graph.copy()
    while True:
        users = graph.users()
        dead = [n for n in graph.nodes if n.kind != "placeholder" and not users[n]]
        if not dead:
            return graph
        graph.remove(dead)


patched(DCE, "dce_drops_unread_placeholders", eliminate_dead_code,
        ('if node.kind in ("output", "placeholder") or', 'if node.kind in ("output",) or'),
        hint="an input that nothing reads is still an input: placeholders are the function's signature "
        "(torch.fx keeps them too); remove only calls, constants and parameters")


@mutant(DCE, hint="a node's arguments can hold nodes inside lists and tuples (torch.stack([a, b])): read "
        "node.inputs, which finds them all, not only the arguments that are nodes themselves")
def dce_misses_nested_arguments(graph):
    graph = graph.copy()
    live: set = set()
    for node in reversed(graph.nodes):
        if node.kind in ("output", "placeholder") or node in live:
            live.add(node)
            live.update(a for a in node.args if isinstance(a, Node))
            if node.kind == "output":
                live.update(node.inputs)
    graph.remove([n for n in graph.nodes if n not in live])
    return graph


# ---------------------------------------------------------------- common-subexpression elimination


KEY = "key = (id(node.target), _key(node.args), _key(node.kwargs))"
LEAF = '(type(v).__name__, v) for v in leaves)'

patched(CSE, "cse_key_ignores_types", eliminate_common_subexpressions, (_cse_key, LEAF, "v for v in leaves)"),
        hint="in Python 2 == 2.0 (and hash(2) == hash(2.0)), so a key of plain values merges n * 2 with "
        "n * 2.0; on an integer tensor the first is int64 and the second float32: put each argument's type in the "
        "key beside its value")

patched(CSE, "cse_ignores_keywords", eliminate_common_subexpressions, (KEY, "key = (id(node.target), _key(node.args))"),
        hint="keyword arguments are arguments too: gelu(x) and gelu(x, approximate='tanh') differ; put "
        "node.kwargs in the key as well as node.args")

patched(CSE, "cse_compares_other_arguments_by_type", eliminate_common_subexpressions,
        (_cse_key, LEAF, "((type(v).__name__, v) if v is None or isinstance(v, (int, float, str)) else type(v).__name__) "
         "for v in leaves)"),
        hint="every argument that is not a node is compared by value, a dtype or a device too: "
        "x.to(torch.float16) and x.to(torch.bfloat16) are two different calls")

patched(CSE, "cse_ignores_plain_arguments", eliminate_common_subexpressions,
        (KEY, "key = (id(node.target), tuple(id(i) for i in node.inputs))"),
        hint="two calls of the same op on the same nodes are not the same value when their other arguments "
        "differ: x * 2 is not x * 3, softmax over dim 0 is not softmax over dim -1; compare every argument")

patched(CSE, "cse_compares_inputs_as_a_set", eliminate_common_subexpressions,
        (KEY, "key = (id(node.target), frozenset(id(i) for i in node.inputs), "
              "tuple(_key(v) for v in node.args if not isinstance(v, (Node, list, tuple))), _key(node.kwargs))"),
        hint="the order of the arguments matters: a - b is not b - a, stack([a, b]) is not stack([b, a]); "
        "compare the arguments in order, not the set of nodes read")

patched(CSE, "cse_forgets_the_survivor_is_returned", eliminate_common_subexpressions,
        ("returned.add(survivor)", "pass"),
        hint="when a returned node merges into an earlier one, the survivor is returned from then on: add it "
        "to your set of returned nodes, or a third copy that is returned merges into it too and the caller gets one "
        "tensor twice")

patched(CSE, "cse_merges_returned_values", eliminate_common_subexpressions,
        ("if survivor is node or (node in returned and survivor in returned):", "if survivor is node:"),
        hint="two values that are both returned must stay two tensors: eager returns two, and a caller "
        "that changes one in place (out.add_(1)) must not change the other; merge them only when at most "
        "one of them is returned")

patched(CSE, "cse_only_neighbours", eliminate_common_subexpressions,
        ("survivor = seen.setdefault(key, node)", "survivor = seen.setdefault(key, node)\n        seen = {key: survivor}"),
        hint="a repeated computation is not always next to the first: remember every call seen so far "
        "(a dict from key to node), not only the previous one")


# ---------------------------------------------------------------- constant folding


patched(FOLD, "fold_ignores_frozen", fold_constants, ('elif node.kind == "param" and graph.frozen:', 'elif node.kind == "param":'),
        hint="with gradients the parameters are what training changes and what the gradient flows to: "
        "they are constants only in a frozen graph (graph.frozen: eval mode, no gradients)")

patched(FOLD, "fold_no_chains", fold_constants, ("known[folded] = value", "pass"),
        hint="a folded value is a constant too: put it in your dict of known values, so that the calls "
        "reading it fold as well (p * 2 + arange(6) is two folds, one after the other)")

patched(FOLD, "fold_returned_values", fold_constants, ("returned = returned_storages(graph)", "returned = set()"),
        hint="a returned value must be a fresh tensor at every call, as eager gives: folded, it is the same "
        "tensor each time, and a caller that changes it in place changes what the next call returns; "
        "never fold a node in returned_storages(graph)")

patched(FOLD, "fold_only_constant_nodes", fold_constants, ('elif node.kind == "param" and graph.frozen:', "elif False:"),
        hint="parameters are constants in a frozen graph (graph.frozen): read them with "
        "graph.param_value(node), so that the guards compare the values you baked in")

patched(FOLD, "fold_bakes_parameters_unguarded", fold_constants, ("graph.param_value(i)  # its value is baked in now", "pass"),
        hint="read a parameter's value with graph.param_value(node), not node.attrs['value']: param_value "
        "records it in graph.baked, and the guards then compare its values at every call and "
        "recompile after a change (p.data.mul_(...) leaves the version counter as it was); without it the "
        "compiled code keeps computing with the old values")

patched(FOLD, "fold_when_any_input_is_known", fold_constants,
        ("all(i in known for i in node.inputs)", "any(i in known for i in node.inputs)"),
        hint="a call can be folded only when every input is known at compile time; one that reads an input "
        "(a placeholder), directly or through other calls, changes at every call")


# ---------------------------------------------------------------- the conv + batchnorm arithmetic


def _per_channel(scale, weight):
    return scale.reshape(-1, *([1] * (weight.dim() - 1)))


@mutant(FOLD_CONV_BN, hint="a new tensor is created on the CPU unless told otherwise: torch.zeros(n, "
        "dtype=weight.dtype) on a GPU model mixes devices; create it with device=weight.device (or "
        "torch.zeros_like(bias))")
def fold_conv_bn_new_bias_on_the_cpu(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    new_bias = torch.zeros(weight.shape[0], dtype=weight.dtype)
    new_bias += (bias - running_mean) * scale + beta
    return weight * _per_channel(scale, weight), new_bias


@mutant(FOLD_CONV_BN, hint="a new tensor takes the default dtype (float32) and device (cpu) unless told: "
        "torch.zeros(n) for a float64 conv stays float32 when you add into it; create it with "
        "dtype=weight.dtype, device=weight.device (or torch.zeros_like(bias))")
def fold_conv_bn_new_bias_of_the_default_dtype(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    new_bias = torch.zeros(weight.shape[0])
    new_bias += (bias - running_mean) * scale + beta
    return weight * _per_channel(scale, weight), new_bias


@mutant(FOLD_CONV_BN, hint="eps goes inside the square root: the batch norm divides by sqrt(var + eps), "
        "not by sqrt(var) + eps")
def fold_conv_bn_eps_outside_sqrt(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / (torch.sqrt(running_var) + eps)
    return weight * _per_channel(scale, weight), (bias - running_mean) * scale + beta


@mutant(FOLD_CONV_BN, hint="the batch norm divides by the standard deviation, sqrt(var + eps), not by the "
        "variance")
def fold_conv_bn_divides_by_var(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / (running_var + eps)
    return weight * _per_channel(scale, weight), (bias - running_mean) * scale + beta


@mutant(FOLD_CONV_BN, hint="eps is part of the batch norm: sqrt(var + eps), and with a small variance it matters")
def fold_conv_bn_forgets_eps(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / torch.sqrt(running_var)
    return weight * _per_channel(scale, weight), (bias - running_mean) * scale + beta


@mutant(FOLD_CONV_BN, hint="the conv's own bias goes through the batch norm too: the new bias is "
        "(bias - mean) * scale + beta, not beta - mean * scale")
def fold_conv_bn_forgets_the_conv_bias(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    return weight * _per_channel(scale, weight), beta - running_mean * scale


@mutant(FOLD_CONV_BN, hint="the conv's bias is scaled like everything else the conv outputs: "
        "(bias - mean) * scale + beta, not bias - mean * scale + beta")
def fold_conv_bn_bias_unscaled(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    return weight * _per_channel(scale, weight), bias - running_mean * scale + beta


@mutant(FOLD_CONV_BN, hint="the bias needs the batch norm's shift beta added: (bias - mean) * scale + beta")
def fold_conv_bn_forgets_beta(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    return weight * _per_channel(scale, weight), (bias - running_mean) * scale


@mutant(FOLD_CONV_BN, hint="the mean is subtracted before scaling: (bias - mean) * scale + beta")
def fold_conv_bn_forgets_the_mean(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    return weight * _per_channel(scale, weight), bias * scale + beta


@mutant(FOLD_CONV_BN, hint="one scale per output channel, and the output channel is the weight's first axis "
        "([out, in, kh, kw]): reshape the scale to (out, 1, 1, 1), not (1, out, 1, 1)")
def fold_conv_bn_scales_the_input_axis(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = gamma / torch.sqrt(running_var + eps)
    return weight * scale.reshape(1, -1, 1, 1), (bias - running_mean) * scale + beta


@mutant(FOLD_CONV_BN, hint="the scale is gamma / sqrt(var + eps): gamma multiplies, it does not divide")
def fold_conv_bn_divides_by_gamma(weight, bias, running_mean, running_var, gamma, beta, eps):
    scale = 1 / (gamma * torch.sqrt(running_var + eps))
    return weight * _per_channel(scale, weight), (bias - running_mean) * scale + beta
