"""Einstein summation, rebuilt in stages, one idea per module.

    parse  ->  infer  ->  path  ->  lower  (-> api runs it all)

- `parse`: the equation string and the operands' shapes become an `Equation`: one label per
  dimension (ellipsis dimensions get labels "…0", "…1", ...), one broadcast size per label;
  anything that does not fit raises `EinsumError` (a ValueError and a RuntimeError).
- `infer`: the implicit-output rule (no '->'): labels used exactly once, uppercase before
  lowercase, ellipsis dimensions first. `infer_output` is a stage: the parser calls it, and
  `tensorcraft.substitute(infer_output=f)` runs the pipeline with `f` in its place.
- `loops`: the definition as loops over every label (`einsum_loops`), and the same loops
  printed as Python source (`loop_code`): the reference the fast path is checked against.
- `path`: the order of pairwise contractions ('optimal', 'greedy', or left to right), costed
  with opt_einsum's FLOP model (`contract_path`).
- `lower`: one contraction as diagonals -> early sums -> permute -> reshape -> bmm -> reshape.
- `api`: `einsum`, which plans once per (equation, shapes), caches the plan, and runs it on
  torch tensors (any device, autograd) or numpy arrays.
"""
from tensorcraft.einstein.api import Plan, build_plan, einsum
from tensorcraft.einstein.infer import infer_output
from tensorcraft.einstein.loops import einsum_loops, loop_code
from tensorcraft.einstein.lower import PairPlan, SinglePlan, plan_pair, plan_single, run_pair, run_single
from tensorcraft.einstein.parse import EinsumError, Equation, parse_equation
from tensorcraft.einstein.path import PathInfo, contract_path

__all__ = [
    "EinsumError", "Equation", "PairPlan", "PathInfo", "Plan", "SinglePlan", "build_plan", "contract_path",
    "einsum", "einsum_loops", "infer_output", "loop_code", "parse_equation", "plan_pair", "plan_single",
    "run_pair", "run_single",
]
