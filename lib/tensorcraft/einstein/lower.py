"""Lower one contraction to the operations a BLAS library is fast at.

Two operands A and B with labelled dimensions become

    A: take diagonals -> drop broadcast dims -> sum own labels -> permute -> reshape (batch, left, sum)
    B: take diagonals -> drop broadcast dims -> sum own labels -> permute -> reshape (batch, sum, right)
    result = bmm(A, B) -> reshape (batch..., left..., right...) -> permute to the wanted order

where, after the first three steps, every label falls in one of four groups:

    batch   in A and B, kept         (like b in 'bij,bjk->bik')
    sum     in A and B, not kept     (like j: the matrix product sums it)
    left    only in A (kept)         (like i)
    right   only in B (kept)         (like k)

Without batch labels the bmm is a plain mm. Two degenerate cases get a cheaper product (see
`PairPlan`): nothing to sum is a broadcast multiply; nothing kept but batch labels is a batch
of dot products, done as multiply-and-sum.

A label only one operand has and that nothing later needs is summed before the bmm, because
summing early makes the matrices smaller. A size-1 dimension facing a larger size in the other
operand (broadcasting) is dropped: the operand is constant along it, so the label simply
becomes the other operand's own.

One operand alone (`'ii->i'`, `'ij->ji'`, `'ij->'`) takes the same first three steps and a permute.

`plan_pair` / `plan_single` build a plan (pure shape logic, printable); `run_pair` /
`run_single` execute it on tensors. `contract_pair` (tensors and labels in, tensor out) is the
product step as a swappable stage: `tensorcraft.substitute(contract_pair=f)` makes einsum run
`f` for the permute -> reshape -> bmm -> reshape -> permute of every pair.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import torch

from tensorcraft.stages import substitutions_active, swappable


def _show(labels: Sequence[str]) -> str:
    return "".join(labels) if all(len(l) == 1 for l in labels) else " ".join(labels)


@dataclass(frozen=True)
class Preparation:
    """The steps that bring one operand to the labels it keeps: diagonals, squeeze, sum."""

    labels_in: tuple[str, ...]
    diagonals: tuple[tuple[int, int], ...]   # each: torch.diagonal(x, 0, d1, d2), appends the diagonal last
    squeeze: tuple[int, ...]                 # size-1 dims that broadcast against the other operand
    sum_dims: tuple[int, ...]                # labels no one else needs
    labels: tuple[str, ...]                  # labels after these steps
    shape: tuple[int, ...]                   # shape after these steps

    def describe(self) -> list[str]:
        steps = []
        if self.diagonals:
            steps.append(f"diagonal over dims {', '.join(map(str, self.diagonals))}")
        if self.squeeze:
            steps.append(f"squeeze broadcast dims {self.squeeze}")
        if self.sum_dims:
            steps.append(f"sum dims {self.sum_dims}")
        return steps


def prepare(labels: Sequence[str], shape: Sequence[int], keep: Collection[str],
            other_sizes: dict[str, int]) -> Preparation:
    """Plan diagonals, broadcast squeezes and early sums for one operand.

    `keep`: labels needed after this contraction; `other_sizes`: label -> size of the labels the
    other operand keeps after its own broadcast squeeze (empty for a single operand).
    """
    labels, shape = list(labels), list(shape)
    labels_in = tuple(labels)
    diagonals = []
    while len(set(labels)) < len(labels):                      # a repeated label: take its diagonal
        label = next(l for l in labels if labels.count(l) > 1)
        d1 = labels.index(label)
        d2 = labels.index(label, d1 + 1)
        diagonals.append((d1, d2))
        size = shape[d1]
        for d in (d2, d1):
            del labels[d], shape[d]
        labels.append(label)
        shape.append(size)
    squeeze = tuple(d for d, (l, s) in enumerate(zip(labels, shape))
                    if s == 1 and other_sizes.get(l, 1) != 1)
    labels = [l for d, l in enumerate(labels) if d not in squeeze]
    shape = [s for d, s in enumerate(shape) if d not in squeeze]
    sum_dims = tuple(d for d, l in enumerate(labels) if l not in keep and l not in other_sizes)
    labels_out = tuple(l for d, l in enumerate(labels) if d not in sum_dims)
    shape_out = tuple(s for d, s in enumerate(shape) if d not in sum_dims)
    return Preparation(labels_in, tuple(diagonals), squeeze, sum_dims, labels_out, shape_out)


def _sum(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    # torch.sum turns integer tensors into int64; einsum keeps the operands' dtype, as numpy does
    if x.is_floating_point() or x.is_complex():
        return x.sum(dims)
    return x.sum(dims, dtype=x.dtype)


def run_preparation(prep: Preparation, x: torch.Tensor) -> torch.Tensor:
    for d1, d2 in prep.diagonals:
        x = torch.diagonal(x, 0, d1, d2)
    if prep.squeeze:
        x = x.squeeze(prep.squeeze)
    if prep.sum_dims:
        x = _sum(x, prep.sum_dims)
    return x


def _permutation(have: Sequence[str], want: Sequence[str]) -> tuple[int, ...] | None:
    """The permute that takes labels `have` to `want`; None when it is the identity."""
    perm = tuple(have.index(l) for l in want)
    return None if perm == tuple(range(len(perm))) else perm


# --------------------------------------------------------------------------- one operand


@dataclass(frozen=True)
class SinglePlan:
    """One operand to the output: diagonals, sums, then a permute."""

    prep: Preparation
    permute: tuple[int, ...] | None
    labels: tuple[str, ...]

    def __str__(self) -> str:
        steps = self.prep.describe() + ([f"permute {self.permute}"] if self.permute else [])
        return (f"{_show(self.prep.labels_in)} -> {_show(self.labels)}: "
                + (" -> ".join(steps) if steps else "nothing to do (the result is a view of the operand)"))


def plan_single(labels: Sequence[str], shape: Sequence[int], output: Sequence[str]) -> SinglePlan:
    prep = prepare(labels, shape, set(output), {})
    return SinglePlan(prep, _permutation(prep.labels, output), tuple(output))


def run_single(plan: SinglePlan, x: torch.Tensor) -> torch.Tensor:
    out = run_preparation(plan.prep, x)
    if plan.permute:
        return out.permute(plan.permute)
    # never the caller's own tensor object (as torch.einsum): requires_grad_(), hooks or a resize
    # on the result must not reach the input; a view shares the memory, as torch's result does
    return x.view_as(x) if out is x else out


# --------------------------------------------------------------------------- two operands


@dataclass(frozen=True)
class PairPlan:
    """Two operands to one result through one product of matrices.

    kind "matmul": A as (B, M, K) and B as (B, K, N), or (M, K) and (K, N) without batch labels;
    kind "dot":    nothing kept but batch labels: A and B as (B, K), multiply and sum K (a batch of
                   dot products, where bmm with 1xK @ Kx1 matrices would waste its per-matrix setup);
    kind "multiply": nothing to sum: A as (B, M, 1) times B as (B, 1, N), a broadcast product.
    """

    a: Preparation
    b: Preparation
    batch: tuple[str, ...]
    left: tuple[str, ...]
    summed: tuple[str, ...]
    right: tuple[str, ...]
    kind: str
    a_permute: tuple[int, ...] | None     # to (batch, left, summed)
    b_permute: tuple[int, ...] | None     # to (batch, summed, right)
    a_matrix: tuple[int, ...]             # the shape A takes for the product
    b_matrix: tuple[int, ...]
    a_reshape: bool                       # False when A already has that shape
    b_reshape: bool
    unflat: tuple[int, ...]               # sizes of batch + left + right
    out_reshape: bool
    out_permute: tuple[int, ...] | None   # to the requested result order
    labels: tuple[str, ...]               # the result's labels

    def __str__(self) -> str:
        def side(name: str, prep: Preparation, perm, matrix, reshape, groups) -> str:
            steps = prep.describe()
            if perm:
                steps.append(f"permute {perm}")
            if reshape:
                steps.append(f"reshape {matrix}")
            return (f"  {name} {_show(prep.labels_in):<8} " + (" -> ".join(steps) or "as it is")
                    + f"   [{groups}]")

        groups = (f"batch={_show(self.batch) or '-'} left={_show(self.left) or '-'} "
                  f"sum={_show(self.summed) or '-'} right={_show(self.right) or '-'}")
        product = {"matmul": f"{'bmm' if len(self.a_matrix) == 3 else 'mm'} {self.a_matrix} @ {self.b_matrix}",
                   "dot": f"multiply {self.a_matrix} * {self.b_matrix}, sum the last dim",
                   "multiply": f"multiply {self.a_matrix} * {self.b_matrix} (nothing to sum)"}[self.kind]
        a_order = {"matmul": "batch, left, sum", "dot": "batch, sum", "multiply": "batch, left, 1"}[self.kind]
        b_order = {"matmul": "batch, sum, right", "dot": "batch, sum", "multiply": "batch, 1, right"}[self.kind]
        out = [f"contract {_show(self.a.labels_in)},{_show(self.b.labels_in)}->{_show(self.labels)}   ({groups})",
               side("A", self.a, self.a_permute, self.a_matrix, self.a_reshape, a_order),
               side("B", self.b, self.b_permute, self.b_matrix, self.b_reshape, b_order),
               f"  {product}" + (f" -> reshape {self.unflat}" if self.out_reshape else "")
               + (f" -> permute {self.out_permute}" if self.out_permute else "")]
        return "\n".join(out)


def plan_pair(a_labels: Sequence[str], a_shape: Sequence[int],
              b_labels: Sequence[str], b_shape: Sequence[int],
              keep: Collection[str], result: Sequence[str] | None = None) -> PairPlan:
    """Plan `A, B -> result`. `keep`: the labels still needed (later operands and the output).

    `result` fixes the result's label order (the last contraction passes the output);
    None keeps the natural order batch + left + right, which costs no permute.
    """
    keep = set(keep) if result is None else set(result)
    a_sizes = dict(zip(a_labels, a_shape))
    b_sizes = dict(zip(b_labels, b_shape))

    def after_squeeze(own: dict[str, int], other: dict[str, int]) -> dict[str, int]:
        # the labels an operand still has once its broadcast (size-1) dims are squeezed away
        return {l: s for l, s in own.items() if not (s == 1 and other.get(l, 1) != 1)}

    a = prepare(a_labels, a_shape, keep, after_squeeze(b_sizes, a_sizes))
    b = prepare(b_labels, b_shape, keep, after_squeeze(a_sizes, b_sizes))
    size = dict(zip(a.labels, a.shape)) | dict(zip(b.labels, b.shape))
    batch = tuple(l for l in a.labels if l in b.labels and l in keep)
    summed = tuple(l for l in a.labels if l in b.labels and l not in keep)
    left = tuple(l for l in a.labels if l not in b.labels)
    right = tuple(l for l in b.labels if l not in a.labels)

    def prod(labels: Sequence[str]) -> int:
        return math.prod([size[l] for l in labels])

    nb, m, k, n = prod(batch), prod(left), prod(summed), prod(right)
    if not summed:
        kind, a_matrix, b_matrix, product_shape = "multiply", (nb, m, 1), (nb, 1, n), (nb, m, n)
    elif not left and not right:
        kind, a_matrix, b_matrix, product_shape = "dot", (nb, k), (nb, k), (nb,)
    elif not batch:
        kind, a_matrix, b_matrix, product_shape = "matmul", (m, k), (k, n), (m, n)
    else:
        kind, a_matrix, b_matrix, product_shape = "matmul", (nb, m, k), (nb, k, n), (nb, m, n)
    natural = batch + left + right
    unflat = tuple(size[l] for l in natural)
    return PairPlan(
        a=a, b=b, batch=batch, left=left, summed=summed, right=right, kind=kind,
        a_permute=_permutation(a.labels, batch + left + summed),
        b_permute=_permutation(b.labels, batch + summed + right),
        a_matrix=a_matrix, b_matrix=b_matrix,
        a_reshape=tuple(size[l] for l in batch + left + summed) != a_matrix,
        b_reshape=tuple(size[l] for l in batch + summed + right) != b_matrix,
        unflat=unflat, out_reshape=unflat != product_shape,
        out_permute=None if result is None else _permutation(natural, result),
        labels=natural if result is None else tuple(result),
    )


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """mm / bmm, or multiply-and-sum where they have no kernel (integer dtypes off the CPU).

    Called directly: torch.matmul would reach the same kernels through extra checks (~10 us
    measured on 64 matrices of 128x64, a transposed operand)."""
    if a.is_floating_point() or a.is_complex() or a.device.type == "cpu":
        return torch.bmm(a, b) if a.dim() == 3 else torch.mm(a, b)
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2, dtype=a.dtype)


def run_pair(plan: PairPlan, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Execute a `PairPlan` on two tensors whose dtypes already agree.

    While a substitute stage is in force (`tensorcraft.substitute`), the product after the
    preparation runs through the stage `contract_pair`, so that a learner's version of it is the
    one einsum uses; otherwise the plan made ahead of time (and cached) runs, which is what
    `contract_pair` computes too."""
    a = run_preparation(plan.a, a)
    b = run_preparation(plan.b, b)
    if substitutions_active():
        return contract_pair(a, plan.a.labels, b, plan.b.labels, plan.labels)
    return run_product(plan, a, b)


@swappable
def contract_pair(a: torch.Tensor, a_labels: Sequence[str], b: torch.Tensor, b_labels: Sequence[str],
                  out_labels: Sequence[str]) -> torch.Tensor:
    """One contraction as permute -> reshape -> bmm -> reshape -> permute.

    `a_labels` / `b_labels`: one label per dimension of a / b, none repeated within an operand;
    a label both operands have is a batch label if `out_labels` has it and is summed otherwise; a
    label only one operand has must be in `out_labels`. Returns the result with its dimensions in
    the order of `out_labels`. (Diagonals, broadcast size-1 dimensions and labels that only one
    operand has and nobody needs are handled before this step: `prepare`.)
    """
    out_labels = tuple(out_labels)
    plan = plan_pair(tuple(a_labels), tuple(a.shape), tuple(b_labels), tuple(b.shape),
                     keep=out_labels, result=out_labels)
    return run_product(plan, a, b)


def run_product(plan: PairPlan, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The product part of a `PairPlan` (permute, reshape, bmm, reshape, permute) on prepared operands."""
    if plan.a_permute:
        a = a.permute(plan.a_permute)
    if plan.b_permute:
        b = b.permute(plan.b_permute)
    if plan.a_reshape:
        a = a.reshape(plan.a_matrix)
    if plan.b_reshape:
        b = b.reshape(plan.b_matrix)
    if plan.kind == "matmul":
        out = _matmul(a, b)
    elif plan.kind == "dot":
        out = _sum(a * b, (-1,))
    else:
        out = a * b
    if plan.out_reshape:
        out = out.reshape(plan.unflat)
    return out.permute(plan.out_permute) if plan.out_permute else out
