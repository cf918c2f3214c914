"""tensorcraft.einops against einops: per-call time, side by side in one run.

    python -m benchmarks einops [--rounds N] [--budget SECONDS] [--only tiny|large]
                                [--backend torch|numpy] [--no-control]

Two sizes: a tiny tensor, where a call costs almost nothing but the Python around it (parsing-cache
lookups, shape bookkeeping), and a large one, where memory bandwidth dominates and both should tie.
Ours and einops' calls alternate, round after round, so that noise from other processes hits both
alike; the table gives the best per-call time of each and the median of the per-round ratios
(< 1: ours is faster).
"""
from __future__ import annotations

import argparse
import statistics
from typing import Callable

import einops
import numpy as np
import torch

import tensorcraft.einops as tc
from tensorcraft.timing import time_rounds

SHAPES = {"tiny": (2, 3, 4, 4), "large": (16, 64, 64, 64)}  # large: 4M float32 = 16 MiB


def cases(x, backend: str) -> list[tuple[str, Callable, Callable]]:
    """(name, ours, einops) triples on the array x of shape (b, c, h, w)."""
    other = x[:, :1]
    all_cases = [
        ("rearrange transpose", "b c h w -> b h w c", {}, None),
        ("rearrange composition", "b c h w -> b (h w c)", {}, None),
        ("rearrange decomposition", "b c (h1 h2) w -> b c h1 h2 w", {"h1": 2}, None),
        ("reduce mean", "b c h w -> b c", {}, "mean"),
        ("reduce max 2x2 pool", "b c (h 2) (w 2) -> b c h w", {}, "max"),
        ("repeat new axis", "b c h w -> b c h w k", {"k": 2}, "repeat"),
        ("repeat upsample 2x", "b c h w -> b c (h 2) (w 2)", {}, "repeat"),
        ("pack", "b * w", {}, "pack"),
    ]
    numpy_names = {"rearrange transpose", "rearrange composition", "reduce mean", "repeat new axis"}
    result = []
    for name, pattern, lengths, kind in all_cases:
        if backend == "numpy" and name not in numpy_names:
            continue
        if kind is None:
            result.append((name, lambda p=pattern, k=lengths: tc.rearrange(x, p, **k),
                           lambda p=pattern, k=lengths: einops.rearrange(x, p, **k)))
        elif kind == "repeat":
            result.append((name, lambda p=pattern, k=lengths: tc.repeat(x, p, **k),
                           lambda p=pattern, k=lengths: einops.repeat(x, p, **k)))
        elif kind == "pack":
            result.append((name, lambda p=pattern: tc.pack([x, other], p),
                           lambda p=pattern: einops.pack([x, other], p)))
        else:
            result.append((name, lambda p=pattern, r=kind: tc.reduce(x, p, r),
                           lambda p=pattern, r=kind: einops.reduce(x, p, r)))
    return result


def compare(ours: Callable, theirs: Callable, rounds: int, budget: float) -> tuple[float, float, float]:
    """Best per-call seconds of ours and einops, and the median of the per-round ratios.

    Each round times ours and einops back to back (in a shuffled order: ``tensorcraft.timing.time_rounds``),
    so a burst of load from another process mostly hits both halves of one ratio alike.
    """
    ours(), theirs()  # warm the plan caches of both
    times = time_rounds({"ours": ours, "einops": theirs}, rounds, budget / rounds / 2)
    ratio = statistics.median(m / r for m, r in zip(times["ours"], times["einops"]))
    return min(times["ours"]), min(times["einops"]), ratio


def _format(seconds: float) -> str:
    return f"{seconds * 1e6:10.2f} us" if seconds < 1e-3 else f"{seconds * 1e3:10.2f} ms"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks einops", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds per case (median taken)")
    parser.add_argument("--budget", type=float, default=0.4, help="seconds spent per case and size")
    parser.add_argument("--only", choices=sorted(SHAPES), help="run one size only")
    parser.add_argument("--backend", choices=["torch", "numpy"], help="run one backend only")
    parser.add_argument("--no-control", dest="control", action="store_false",
                        help="skip the A/A column (einops against itself), which shows the noise level")
    args = parser.parse_args(argv)

    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"einops {einops.__version__}, torch {torch.__version__}, numpy {np.__version__}; "
          f"{args.rounds} alternating rounds;\n"
          "times: best per-call of any round; ratio: median over rounds of ours / einops (< 1: ours faster);\n"
          "A/A: einops / einops measured the same way (its distance from 1.00 is the noise now)")
    print(f"{'backend':8} {'size':6} {'case':26} {'einops':>13} {'tensorcraft':>13} {'ratio':>7} "
          f"{'A/A':>6}")
    ratios = {"tiny": [], "large": []}
    for backend in ["torch", "numpy"]:
        if args.backend and backend != args.backend:
            continue
        for size, shape in SHAPES.items():
            if args.only and size != args.only:
                continue
            x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
            x = torch.from_numpy(x) if backend == "torch" else x
            for name, ours, theirs in cases(x, backend):
                mine, reference, ratio = compare(ours, theirs, args.rounds, args.budget)
                # A/A control: einops against itself, measured the same way; its distance from 1.00
                # is the noise of this machine right now.
                control = compare(theirs, lambda fn=theirs: fn(), args.rounds, args.budget)[2] if args.control else float("nan")
                ratios[size].append(ratio)
                print(f"{backend:8} {size:6} {name:26} {_format(reference)} {_format(mine)} {ratio:7.2f} "
                      f"{control:6.2f}")
    for size, values in ratios.items():
        if values:
            print(f"{size}: geometric mean ratio {statistics.geometric_mean(values):.2f}, "
                  f"worst {max(values):.2f}")
    return 0
