"""einops, rebuilt: rearrange, reduce, repeat, pack, unpack, parse_shape, einsum, and layers.

Every operation runs in three stages, one module each:

1. **parse** (`pattern`): ``"b (h w) c"`` becomes an `Expression`, a list of dimensions, each a
   tuple of axes; numbers are anonymous axes, ``...`` stands for any number of dimensions.
2. **recipe** (`recipe`): both sides of ``"left -> right"`` plus the input's rank and shape become a
   `Plan`: reshape (split composed dims) -> permute (output order, reduced axes last) -> reduce ->
   expand (repeat's new axes) -> reshape (compose output dims), with every axis length inferred
   or checked. `backends` spells the plan as numpy or torch calls.
3. **apply** (`ops`): look the steps up in a cache keyed by (pattern, operation, array type, shape,
   keyword lengths) and run them; a repeated call pays only for the tensor operations.

Anything wrong raises `EinopsError`, naming the call, the input shape and the reason. The results
and the error cases match einops 0.8.2 (checked by tests/einops against einops itself).
The layers (`Rearrange`, `Reduce`) live in `tensorcraft.einops.layers`, so that numpy users do not
import torch.
"""
from tensorcraft.einops.errors import EinopsError
from tensorcraft.einops.ops import (einsum, einsum_equation, pack, parse_shape, rearrange, reduce,
                                    repeat, unpack)

__all__ = ["EinopsError", "einsum", "einsum_equation", "pack", "parse_shape", "rearrange", "reduce",
           "repeat", "unpack"]
