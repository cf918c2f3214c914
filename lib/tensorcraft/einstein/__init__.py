"""Einstein summation, rebuilt in stages (see the package's modules, one idea each).

    parse  ->  infer  ->  path  ->  lower
    string     implicit   which pair   one pair as permute -> reshape
    + shapes   output     first        -> batched matmul -> reshape

`parse` turns the equation and the operands' shapes into an `Equation` (one label per
dimension, one size per label) or raises `EinsumError`; `infer` is the implicit-output rule;
`loops` is the definition as nested loops (the reference everything else is checked against);
`path` chooses the order of pairwise contractions with opt_einsum's cost model; `lower` turns
one contraction into a batched matrix multiply; `api.einsum` runs the whole pipeline, with the
plan cached per (equation, shapes).
"""
from tensorcraft.einstein.infer import implicit_output
from tensorcraft.einstein.loops import einsum_loops, loop_code
from tensorcraft.einstein.parse import Equation, EinsumError, parse_equation

__all__ = ["Equation", "EinsumError", "einsum_loops", "implicit_output", "loop_code", "parse_equation"]
