"""Choose the order of pairwise contractions, and count its cost as opt_einsum does.

Three operands or more can be contracted in many orders, with very different costs:
for `ij,jk,kl->il` with shapes 1000x10, 10x1000, 1000x10, left to right builds a 1000x1000
intermediate (2e7 multiply-adds), while `jk,kl` first costs 2e5.

A path is a list of tuples, opt_einsum's format: each tuple names positions in the current
list of operands; those are removed, contracted, and the result is appended at the end.

The cost model is opt_einsum's (opt_einsum/helpers.py `flop_count`, contract.py `contract_path`):
a contraction of k operands touching the labels L costs

    prod(size[l] for l in L) * (max(1, k - 1) + (1 if some label disappears else 0))

so a pairwise product with a summed label costs 2 * (size of the full index space).
The "naive" cost is the same formula applied to all operands at once.
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Union

from tensorcraft.einstein.parse import EinsumError, Equation, parse_equation
from tensorcraft.stages import swappable

Path = list[tuple[int, ...]]
Optimize = Union[str, bool, None, Sequence[Sequence[int]]]
STRATEGIES = ("auto", "optimal", "greedy", "none")
# "auto": exhaustive search up to this many operands (at most 2700 orders, a few ms, once per shape:
# plans are cached), greedy beyond; opt_einsum's "auto" also searches (branch-and-bound) at 5 and 6
AUTO_OPTIMAL_MAX = 6


def size_of(labels: frozenset[str] | Sequence[str], sizes: dict[str, int]) -> int:
    return math.prod([sizes[l] for l in set(labels)])


def flop_count(labels: frozenset[str], inner: bool, num_terms: int, sizes: dict[str, int]) -> int:
    """opt_einsum's cost of one contraction: the index space, times the number of operations per point."""
    return size_of(labels, sizes) * (max(1, num_terms - 1) + (1 if inner else 0))


@dataclass(frozen=True)
class Step:
    """One contraction of the path."""

    positions: tuple[int, ...]          # positions in the list of operands at this step
    inputs: tuple[frozenset[str], ...]  # their label sets
    result: frozenset[str]              # labels kept by the result
    removed: frozenset[str]             # labels summed away here
    flops: int


def contraction_step(sets: Sequence[frozenset[str]], positions: Sequence[int],
                     output: frozenset[str], sizes: dict[str, int]) -> Step:
    """Contract `sets[positions]`: keep what the output or the other operands need, sum the rest."""
    involved = tuple(sets[p] for p in positions)
    touched = frozenset().union(*involved)
    others = [s for p, s in enumerate(sets) if p not in positions]
    needed = output.union(*others)
    result = touched & needed
    removed = touched - result
    return Step(tuple(positions), involved, result, removed,
                flop_count(touched, bool(removed), len(positions), sizes))


@swappable
def path_flops(sets: Sequence[frozenset[str]], output: frozenset[str], sizes: dict[str, int], path: Path) -> int:
    """The FLOPs of following `path`, in opt_einsum's model: the sum of every step's `flop_count`.

    `contract_path` reports this number as the path's cost (`PathInfo.opt_cost`)."""
    return sum(step.flops for step in walk(sets, path, output, sizes))


def walk(sets: Sequence[frozenset[str]], path: Path, output: frozenset[str],
         sizes: dict[str, int]) -> list[Step]:
    """Follow a path; return its steps with their costs."""
    sets = list(sets)
    steps = []
    for positions in path:
        if not positions or len(set(positions)) != len(positions) or not all(0 <= p < len(sets) for p in positions):
            raise EinsumError(f"contract_path: invalid step {positions} for {len(sets)} operand(s) left")
        step = contraction_step(sets, positions, output, sizes)
        steps.append(step)
        sets = [s for p, s in enumerate(sets) if p not in positions] + [step.result]
    if len(sets) != 1:
        raise EinsumError(f"contract_path: the path leaves {len(sets)} operands instead of 1")
    return steps


# --------------------------------------------------------------------------- the searches


def left_to_right(n: int) -> Path:
    """No optimisation: contract the first two, then the result with the next, and so on."""
    return [(0,)] if n == 1 else [(0, 1)] * (n - 1)


def optimal_path(sets: Sequence[frozenset[str]], output: frozenset[str], sizes: dict[str, int]) -> Path:
    """Try every order of pairwise contractions (depth first), pruning any partial path that is
    already as expensive as the best complete one. Exact, and factorial in the number of operands."""
    if len(sets) <= 2:
        return left_to_right(len(sets))
    best_cost, best_path = math.inf, None

    def search(current: list[frozenset[str]], path: Path, cost: int) -> None:
        nonlocal best_cost, best_path
        if len(current) == 1:
            best_cost, best_path = cost, list(path)
            return
        for i, j in combinations(range(len(current)), 2):
            step = contraction_step(current, (i, j), output, sizes)
            if cost + step.flops >= best_cost:
                continue
            rest = [s for p, s in enumerate(current) if p not in (i, j)]
            search(rest + [step.result], path + [(i, j)], cost + step.flops)

    search(list(sets), [], 0)
    return best_path


@swappable
def greedy_path(sets: Sequence[frozenset[str]], output: frozenset[str], sizes: dict[str, int]) -> Path:
    """Contract, at each step, the pair of operands whose contraction frees the most memory.

    The score of a pair is opt_einsum's "memory-removed" heuristic: the size of the result minus
    the sizes of the two inputs (most negative first; ties go to the pair of oldest operands).
    Only pairs that share a label to sum are candidates; when none is left, the remaining
    operands are multiplied together (outer products), the two smallest first.

    Three things make it fast on large networks (the scheme of opt_einsum's greedy):
    - a priority queue of candidate pairs, not a scan of every pair at every step: after a
      contraction, only the new operand's pairs with its neighbours (operands that share a label
      with it) are scored;
    - an operand is known by its set of labels: two operands with the same labels are multiplied
      elementwise at once (never larger than either), and so is a result whose labels some
      operand already has;
    - labels that every operand holds (like a batch label) are treated as output labels: they can
      only be summed at the very end, so they make no pair a candidate.
    Entries of the queue whose operands are gone are skipped when they come up.
    """
    if len(sets) == 1:
        return [(0,)]
    keep = frozenset(output).union(frozenset.intersection(*map(frozenset, sets)))
    ids = itertools.count(len(sets))   # operands get ids: the inputs 0..n-1, results n, n+1, ...
    steps: list[tuple[int, int]] = []  # the contractions, by id
    alive: dict[frozenset[str], int] = {}                   # labels -> id of the operand that has them
    for n, labels in enumerate(map(frozenset, sets)):
        if labels in alive:            # same labels as an earlier operand: multiply them now
            steps.append((alive[labels], n))
            n = next(ids)
        alive[labels] = n

    holders: dict[str, set[frozenset[str]]] = {}           # label to sum -> the operands that hold it
    for labels in alive:
        for label in labels - keep:
            holders.setdefault(label, set()).add(labels)
    size_cache: dict[frozenset[str], int] = {}

    def size(labels: frozenset[str]) -> int:
        found = size_cache.get(labels)
        if found is None:
            found = size_cache[labels] = math.prod([sizes[l] for l in labels])
        return found

    # labels to sum that two operands or more hold, and three or more: kept by a pair's result
    # when a third operand still needs them (set operations, not a loop over labels: this is hot)
    two_or_more = {l for l, group in holders.items() if len(group) >= 2}
    three_or_more = {l for l, group in holders.items() if len(group) >= 3}

    def recount(labels: Iterable[str]) -> None:
        for label in labels:
            count = len(holders[label])
            (two_or_more.add if count >= 2 else two_or_more.discard)(label)
            (three_or_more.add if count >= 3 else three_or_more.discard)(label)

    def result_of(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
        """What the product of a and b keeps: output labels, and labels a third operand still holds."""
        both = a & b
        return ((a | b) & keep) | (both & three_or_more) | ((a ^ b) & two_or_more)

    queue: list[tuple[int, int, int, frozenset[str], frozenset[str], frozenset[str]]] = []

    def push_best(a: frozenset[str], partners: Iterable[frozenset[str]]) -> None:
        """Queue the best pair of `a` with one of `partners` (the others come back later if needed)."""
        best = None
        for b in partners:
            result = result_of(a, b)
            first, second = (a, b) if alive[a] < alive[b] else (b, a)
            entry = (size(result) - size(a) - size(b), alive[second], alive[first], first, second, result)
            if best is None or entry[:3] < best[:3]:
                best = entry
        if best is not None:
            heapq.heappush(queue, best)

    for group in holders.values():
        by_age = sorted(group, key=alive.__getitem__)
        for n, a in enumerate(by_age[:-1]):
            push_best(a, by_age[n + 1:])

    while queue:
        _, _, _, a, b, result = heapq.heappop(queue)
        if a not in alive or b not in alive:
            continue                   # one of them was contracted since this pair was scored
        steps.append((alive.pop(a), alive.pop(b)))
        for label in (a | b) - keep:
            holders[label].discard(a)
            holders[label].discard(b)
        if result in alive:            # an operand with exactly these labels exists: multiply now
            steps.append((alive[result], next(ids)))
        else:
            for label in result - keep:
                holders[label].add(result)
        alive[result] = next(ids)
        recount((a | b) - keep)
        neighbours = {other for label in result - keep for other in holders[label]}
        neighbours.discard(result)
        push_best(result, neighbours)

    # no two operands share a label to sum any more: multiply what is left, smallest first
    rest = [(size(labels & keep), n, labels) for labels, n in alive.items()]
    heapq.heapify(rest)
    _, first, labels = heapq.heappop(rest)
    while rest:
        _, second, other = heapq.heappop(rest)
        steps.append((min(first, second), max(first, second)))
        labels = (labels | other) & keep
        _, first, labels = heapq.heappushpop(rest, (size(labels), next(ids), labels))
    return positions_from_ids(steps, len(sets))


def positions_from_ids(steps: Sequence[tuple[int, int]], n: int) -> Path:
    """Turn contractions named by operand ids (inputs 0..n-1, the k-th result n+k) into a path of
    positions in the current list, where each result goes to the end and the rest close up."""
    alive = list(range(n))             # ids in list order; always sorted, since results are appended
    path: Path = []
    for k, step in enumerate(steps):
        positions = tuple(bisect.bisect_left(alive, i) for i in step)
        path.append(positions)
        for p in sorted(positions, reverse=True):
            del alive[p]
        alive.append(n + k)
    return path


def checked_optimize(optimize: Any) -> Union[str, bool, None, tuple[tuple[int, ...], ...]]:
    """A strategy as it is, or a path as a tuple of tuples of ints (hashable, so plans can be cached).

    numpy.einsum_path's format, ``['einsum_path', (0, 1), ...]``, is accepted too.
    Anything else raises EinsumError saying what would be right.
    """
    if optimize is None or isinstance(optimize, (bool, str)):
        return optimize
    if isinstance(optimize, (list, tuple)):
        steps = list(optimize)
        if steps and isinstance(steps[0], str) and steps[0] == "einsum_path":
            steps = steps[1:]
        try:
            return tuple(tuple(operator.index(p) for p in step) for step in steps)
        except TypeError:
            pass
    raise EinsumError(f"einsum(): optimize={optimize!r} is neither a strategy {STRATEGIES}, True/False, nor a "
                      f"path (a list of tuples of operand positions, like [(1, 2), (0, 1)])")


def find_path(eq: Equation, optimize: Optimize = "auto") -> Path:
    """The path for an equation under a strategy: 'auto', 'optimal', 'greedy', False/None/'none', or a path.

    'auto' (and True) means 'optimal' up to AUTO_OPTIMAL_MAX operands and 'greedy' beyond.
    """
    optimize = checked_optimize(optimize)
    sets = [frozenset(labels) for labels in eq.input_labels]
    output = frozenset(eq.output_labels)
    if optimize is True or optimize == "auto":
        optimize = "optimal" if len(sets) <= AUTO_OPTIMAL_MAX else "greedy"
    if optimize is False or optimize is None or optimize == "none":
        return left_to_right(len(sets))
    if optimize == "optimal":
        return optimal_path(sets, output, eq.sizes)
    if optimize == "greedy":
        return greedy_path(sets, output, eq.sizes)
    if isinstance(optimize, str):
        raise EinsumError(f"contract_path: unknown optimize={optimize!r}; use one of {STRATEGIES} or a path")
    path = list(optimize)
    walk(sets, path, output, eq.sizes)  # validates it
    return path


# --------------------------------------------------------------------------- the report


def _term(labels: Sequence[str] | frozenset[str], order: Sequence[str]) -> str:
    ordered = [l for l in order if l in labels] if isinstance(labels, frozenset) else list(labels)
    return "".join(ordered)


@dataclass(frozen=True)
class PathInfo:
    """What `contract_path` found, with opt_einsum's cost numbers; print it for a report."""

    equation: Equation
    path: Path
    steps: tuple[Step, ...]
    naive_cost: int
    opt_cost: int
    largest_intermediate: int

    @property
    def speedup(self) -> float:
        return self.naive_cost / max(self.opt_cost, 1)

    def __str__(self) -> str:
        eq = self.equation
        order = list(dict.fromkeys(l for labels in eq.input_labels for l in labels))
        naive_scaling = len(order)
        opt_scaling = max((len(frozenset().union(*s.inputs)) for s in self.steps), default=0)
        lines = [
            f"  Complete contraction:  {eq.normalized}",
            f"         Naive scaling:  {naive_scaling}",
            f"     Optimized scaling:  {opt_scaling}",
            f"      Naive FLOP count:  {self.naive_cost:.3e}",
            f"  Optimized FLOP count:  {self.opt_cost:.3e}",
            f"   Theoretical speedup:  {self.speedup:.3e}",
            f"  Largest intermediate:  {self.largest_intermediate:.3e} elements",
            "-" * 72,
            f"{'step':>4} {'pair':>8} {'FLOPs':>11}   contraction",
            "-" * 72,
        ]
        for n, step in enumerate(self.steps):
            last = n == len(self.steps) - 1
            result = _term(eq.output_labels, order) if last else _term(step.result, order)
            text = ",".join(_term(s, order) for s in step.inputs) + "->" + result
            lines.append(f"{n:>4} {str(step.positions):>8} {step.flops:>11.3e}   {text}")
        return "\n".join(lines)


def path_info(eq: Equation, path: Path) -> PathInfo:
    """Cost a path for a bound equation (the numbers opt_einsum.contract_path reports for it)."""
    sets = [frozenset(labels) for labels in eq.input_labels]
    output = frozenset(eq.output_labels)
    steps = walk(sets, path, output, eq.sizes)
    everything = frozenset().union(*sets)
    inner = sum(len(s) for s in sets) - len(everything) > 0
    naive = flop_count(everything, inner, len(sets), eq.sizes)
    largest = max((size_of(s.result, eq.sizes) for s in steps), default=1)
    return PathInfo(eq, list(path), tuple(steps), naive, path_flops(sets, output, eq.sizes, list(path)), largest)


def contract_path(equation: str, *shapes: Any, optimize: Optimize = "auto") -> tuple[Path, PathInfo]:
    """Find a contraction order. `shapes`: one shape per operand (arrays work too: their `.shape` is used).

    optimize: 'auto' (the default: 'optimal' up to 6 operands, else 'greedy'), 'optimal'
    (exhaustive), 'greedy', False / None / 'none' (left to right), or an explicit path to cost. Returns (path, info) like opt_einsum.contract_path.
    """
    try:
        shapes = [tuple(s.shape) if hasattr(s, "shape") else tuple(s) for s in shapes]
    except TypeError:
        raise EinsumError(f"contract_path: give one shape (a tuple of ints) or array per operand, "
                          f"got {shapes!r}") from None
    eq = parse_equation(equation, shapes)
    path = find_path(eq, optimize)
    return path, path_info(eq, path)
