"""`python -m benchmarks einsum [--rounds N] [--quick] [--device cuda] [--paths] [--path-quality N]`: tensorcraft.einsum beside the real tools.

For each case every implementation is timed in the same run, round-robin (one short batch of
calls per implementation per round), so that noise from other processes hits all of them alike.
The table shows the best and the 20th-percentile time per call over the rounds and, for each,
the ratio to torch.einsum (below 1 is faster). On a shared, throttled 2-core machine the best
of many short batches is the figure that repeats; medians there mostly measure the neighbours. Our einsum's plans are cached per (equation, shapes),
so the timed calls pay only for tensor operations (the first call, which plans, is a warm-up).
`--device cuda` runs the torch contenders on the GPU (each batch ends with a synchronize, so that
the queued kernels are timed too); numpy and the loops, which run on the CPU only, are left out.

`--paths` times the greedy path search instead, ours against opt_einsum's, on random tensor
networks of 10, 20 and 40 operands (each label on exactly two operands, sizes 2-8), and prints
the FLOP cost of both paths as opt_einsum counts them. `--path-quality N` compares path costs
(greedy and optimal) with opt_einsum's on N random small equations.
"""
from __future__ import annotations

import argparse
import random
from collections.abc import Callable

import numpy as np
import opt_einsum
import torch

from tensorcraft.einstein.api import einsum
from tensorcraft.einstein.loops import GENERATED_NAME, einsum_loops, loop_code
from tensorcraft.einstein.networks import LETTERS, random_network
from tensorcraft.einstein.path import contract_path, greedy_path
from tensorcraft.timing import time_rounds


def torch_einsum_without_path(equation: str, *operands: torch.Tensor) -> torch.Tensor:
    """torch.einsum with its opt_einsum path search switched off: contracts left to right."""
    previous = torch.backends.opt_einsum.enabled
    torch.backends.opt_einsum.enabled = False
    try:
        return torch.einsum(equation, *operands)
    finally:
        torch.backends.opt_einsum.enabled = previous


def time_side_by_side(fns: dict[str, Callable[[], object]], rounds: int, target_s: float) -> dict[str, list[float]]:
    """Seconds per call, one entry per round, for each implementation (round-robin batches of about
    ``target_s`` seconds: ``tensorcraft.timing.time_rounds``, whose clock waits for a GPU's queued work)."""
    for fn in fns.values():  # warm-up: plans, caches, first-touch allocations
        fn(), fn()
    return time_rounds(fns, rounds, target_s)


def check_equal(name: str, got: object, expected: torch.Tensor) -> None:
    got = torch.as_tensor(np.asarray(got)) if not isinstance(got, torch.Tensor) else got
    if not torch.allclose(got.to(expected.device, expected.dtype), expected, rtol=1e-3, atol=1e-3):
        raise AssertionError(f"{name} disagrees with torch.einsum")


def fast_cases(rng: np.random.Generator) -> list[tuple[str, str, list[np.ndarray]]]:
    def arr(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    return [
        ("matmul 512^3", "ij,jk->ik", [arr(512, 512), arr(512, 512)]),
        ("batched matmul 64x128^3", "bij,bjk->bik", [arr(64, 128, 128), arr(64, 128, 128)]),
        ("attention scores 8x8x128x64", "bhqd,bhkd->bhqk", [arr(8, 8, 128, 64), arr(8, 8, 128, 64)]),
        ("chain 1000x10,10x1000,1000x10", "ij,jk,kl->il", [arr(1000, 10), arr(10, 1000), arr(1000, 10)]),
        ("bilinear 256", "bi,ij,bj->b", [arr(256, 256), arr(256, 256), arr(256, 256)]),
    ]


def loop_cases(rng: np.random.Generator) -> list[tuple[str, str, list[np.ndarray]]]:
    def arr(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape)

    return [
        ("matmul 8^3", "ij,jk->ik", [arr(8, 8), arr(8, 8)]),
        ("batched matmul 4x6^3", "bij,bjk->bik", [arr(4, 6, 6), arr(4, 6, 6)]),
        ("trace 16", "ii", [arr(16, 16)]),
        ("chain 6x5,5x6,6x5", "ij,jk,kl->il", [arr(6, 5), arr(5, 6), arr(6, 5)]),
    ]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def print_table(title: str, rows: list[tuple[str, str, list[float], list[float]]]) -> None:
    print(f"\n{title}")
    print(f"{'case':<30} {'implementation':<32} {'best ms':>10} {'p20 ms':>10} {'best/torch':>11} {'p20/torch':>10}")
    print("-" * 110)
    last_case = None
    for case, impl, times, reference in rows:
        best, p20 = min(times), percentile(times, 20)
        shown = case if case != last_case else ""
        print(f"{shown:<30} {impl:<32} {best * 1e3:>10.4f} {p20 * 1e3:>10.4f} "
              f"{best / min(reference):>10.2f}x {p20 / percentile(reference, 20):>9.2f}x")
        last_case = case


def random_equation(rng: np.random.Generator, max_operands: int) -> tuple[str, list[tuple[int, ...]]]:
    """A random contraction: 3..max_operands operands of 0-4 letters from a pool of 6, sizes 1-8."""
    pool = "abcdef"
    size = {c: int(rng.integers(1, 9)) for c in pool}
    terms = ["".join(rng.choice(list(pool), size=int(rng.integers(0, 5)))) for _ in range(int(rng.integers(3, max_operands + 1)))]
    used = sorted(set("".join(terms)))
    output = "".join(c for c in used if rng.random() < 0.3)
    return ",".join(terms) + "->" + output, [tuple(size[c] for c in t) for t in terms]


def compare_paths(cases: int, max_operands: int) -> None:
    """Path quality, not speed: our FLOP counts over opt_einsum's on random equations (same cost model)."""
    rng = np.random.default_rng(0)
    ratios: dict[str, list[float]] = {"greedy": [], "optimal": []}
    worst = {"greedy": ("", 0.0), "optimal": ("", 0.0)}
    for _ in range(cases):
        equation, shapes = random_equation(rng, max_operands)
        for strategy in ratios:
            if strategy == "optimal" and len(shapes) > 6:
                continue  # exhaustive search: factorial in the number of operands (both ours and theirs)
            ours = contract_path(equation, *shapes, optimize=strategy)[1].opt_cost
            theirs = int(opt_einsum.contract_path(equation, *shapes, shapes=True, optimize=strategy)[1].opt_cost)
            ratio = ours / max(theirs, 1)
            ratios[strategy].append(ratio)
            if ratio > worst[strategy][1]:
                worst[strategy] = (equation, ratio)
    print(f"\npaths: our FLOP count / opt_einsum's, {cases} random equations of 3-{max_operands} operands"
          " ('optimal' on those of at most 6)")
    for strategy, r in ratios.items():
        a = np.array(r)
        print(f"  {strategy:<8} equal {np.mean(a == 1):5.1%}  ours cheaper {np.mean(a < 1):5.1%}  "
              f"mean {a.mean():.3f}  max {a.max():.3f} (on {worst[strategy][0]!r})")



def network_equation(sets: list[frozenset[str]]) -> str:
    return ",".join("".join(sorted(s)) for s in sets) + "->"


def opt_einsum_cost(sets: list[frozenset[str]], sizes: dict[str, int], path: object) -> int:
    """The FLOPs of a path as opt_einsum itself counts them (the ground truth for both paths)."""
    shapes = [tuple(sizes[l] for l in sorted(s)) for s in sets]
    return int(opt_einsum.contract_path(network_equation(sets), *shapes, shapes=True, optimize=path)[1].opt_cost)


def time_greedy_searches(rounds: int, target_s: float, operands: tuple[int, ...] = (10, 20, 40),
                         networks: int = 5) -> int:
    """Our greedy search and opt_einsum's on the same networks, timed round-robin in one run."""
    print(f"greedy path search, ours (tensorcraft.einstein.path.greedy_path) and opt_einsum {opt_einsum.__version__}'s "
          f"(opt_einsum.paths.greedy), on {networks} random networks per size: each label on two operands, "
          f"sizes 2-8, 1.5 labels per operand; {rounds} rounds of ~{target_s * 1e3:.0f} ms each")
    print("times: best over the rounds, summed over the networks; costs: FLOPs counted by opt_einsum.contract_path")
    print(f"{'operands':>8} {'ours ms':>9} {'opt_einsum ms':>14} {'time ratio':>11}   "
          f"{'ours FLOPs':>11} {'opt_einsum FLOPs':>17} {'cost ratio':>11}")
    print("-" * 92)
    failed = 0
    whole: dict[int, list[float]] = {}
    for n in operands:
        rng = random.Random(n)
        ours_s = theirs_s = 0.0
        ours_cost = theirs_cost = 0
        for _ in range(networks):
            sets, sizes = random_network(rng, n)
            as_sets = [set(s) for s in sets]
            fns = {"ours": lambda: greedy_path(sets, frozenset(), sizes),
                   "opt_einsum": lambda: opt_einsum.paths.greedy(as_sets, set(), sizes)}
            if len(sizes) <= len(LETTERS):  # our parser takes letters only: time contract_path itself too
                letters = dict(zip(sorted(sizes), LETTERS))
                equation = ",".join("".join(letters[l] for l in sorted(s)) for s in sets) + "->"
                shapes = [tuple(sizes[l] for l in sorted(s)) for s in sets]
                fns["ours contract_path"] = lambda: contract_path(equation, *shapes, optimize="greedy")
                fns["opt_einsum contract_path"] = lambda: opt_einsum.contract_path(
                    equation, *shapes, shapes=True, optimize="greedy")
            times = time_side_by_side(fns, rounds, target_s)
            if "ours contract_path" in times:
                whole[n] = [whole.get(n, [0.0, 0.0])[0] + min(times["ours contract_path"]),
                            whole.get(n, [0.0, 0.0])[1] + min(times["opt_einsum contract_path"])]
            ours_s += min(times["ours"])
            theirs_s += min(times["opt_einsum"])
            ours_cost += opt_einsum_cost(sets, sizes, greedy_path(sets, frozenset(), sizes))
            theirs_cost += opt_einsum_cost(sets, sizes, opt_einsum.paths.greedy(as_sets, set(), sizes))
        time_ratio, cost_ratio = ours_s / theirs_s, ours_cost / theirs_cost
        failed += time_ratio > 2 or cost_ratio > 1
        print(f"{n:>8} {ours_s * 1e3:>9.3f} {theirs_s * 1e3:>14.3f} {time_ratio:>10.2f}x   "
              f"{ours_cost:>11.4g} {theirs_cost:>17.4g} {cost_ratio:>10.3f}x")
    print(f"goal: time ratio at most 2x and cost ratio at most 1x: {'met' if not failed else 'NOT met'} "
          "(times are noisy on a shared machine; the ratios come from one run, side by side)")
    print("\ncontract_path(optimize='greedy') end to end (parse, search, cost report), same networks, where "
          f"their labels fit in {len(LETTERS)} letters")
    print(f"{'operands':>8} {'ours ms':>9} {'opt_einsum ms':>14} {'time ratio':>11}")
    for n, (ours, theirs) in whole.items():
        print(f"{n:>8} {ours * 1e3:>9.3f} {theirs * 1e3:>14.3f} {ours / theirs:>10.2f}x")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks einsum", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="round-robin rounds per case (default 60)")
    parser.add_argument("--batch-ms", type=float, default=2.0, help="time per batch of calls (default 2 ms)")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2 ms: a smoke run")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="where the torch contenders run (cuda: numpy and the loops are left out)")
    parser.add_argument("--paths", action="store_true",
                        help="instead, time the greedy path search against opt_einsum's on networks of 10, 20, 40 operands")
    parser.add_argument("--path-quality", type=int, metavar="N", default=0,
                        help="instead, compare path FLOP counts with opt_einsum on N random equations")
    parser.add_argument("--max-operands", type=int, default=6, help="for --path-quality (default 6)")
    args = parser.parse_args(argv)
    if args.path_quality:
        compare_paths(args.path_quality, args.max_operands)
        return 0
    rounds, target_s = (3, 0.002) if args.quick else (args.rounds, args.batch_ms / 1e3)
    if args.paths:
        return time_greedy_searches(min(rounds, 20), max(target_s, 0.01))
    rng = np.random.default_rng(0)
    on_gpu = args.device == "cuda"
    if on_gpu and not torch.cuda.is_available():
        print("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
        return 2
    where = torch.cuda.get_device_name() if on_gpu else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__} ({where}), numpy {np.__version__}, "
          f"opt_einsum {opt_einsum.__version__}; float32; {rounds} rounds of ~{target_s * 1e3:.0f} ms per implementation")

    rows = []
    for case, equation, arrays in fast_cases(rng):
        tensors = [torch.from_numpy(a).to(args.device) for a in arrays]
        fns: dict[str, Callable[[], object]] = {
            "torch.einsum": lambda: torch.einsum(equation, *tensors),
            "tensorcraft.einsum": lambda: einsum(equation, *tensors),
        }
        if len(tensors) > 2:
            fns["torch.einsum (opt_einsum off)"] = lambda: torch_einsum_without_path(equation, *tensors)
        if not on_gpu:
            fns["numpy.einsum(optimize=True)"] = lambda: np.einsum(equation, *arrays, optimize=True)
        fns["opt_einsum.contract (torch)"] = lambda: opt_einsum.contract(equation, *tensors)
        expected = torch.einsum(equation, *tensors)
        for name, fn in fns.items():
            check_equal(name, fn(), expected)
        times = time_side_by_side(fns, rounds, target_s)
        rows += [(case, name, t, times["torch.einsum"]) for name, t in times.items()]
    print_table("einsum, ratios to torch.einsum (target: tensorcraft within 1.1x everywhere; "
                "faster than torch without path optimisation on 3 operands)", rows)
    if on_gpu:
        return 0

    rows = []
    for case, equation, arrays in loop_cases(rng):
        tensors = [torch.from_numpy(a) for a in arrays]
        namespace: dict[str, object] = {}
        exec(loop_code(equation, *[a.shape for a in arrays]), namespace)
        generated = namespace[GENERATED_NAME]
        fns = {
            "torch.einsum": lambda: torch.einsum(equation, *tensors),
            "einsum_loops": lambda: einsum_loops(equation, *arrays),
            "loop_code (exec'd)": lambda: generated(*arrays),
        }
        expected = torch.einsum(equation, *tensors)
        for name, fn in fns.items():
            check_equal(name, fn(), expected)
        times = time_side_by_side(fns, max(3, rounds // 6), target_s)
        rows += [(case, name, t, times["torch.einsum"]) for name, t in times.items()]
    print_table("the definition as loops (small sizes, float64), ratios to torch.einsum", rows)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
