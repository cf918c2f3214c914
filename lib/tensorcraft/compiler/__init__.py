"""A small torch.compile: capture -> passes -> memory planning -> codegen -> runtime.

Public entry points: ``tensorcraft.compile`` (``api.compile``) and ``dynamo_backend.backend``, a
backend for ``torch.compile(model, backend=tensorcraft.compiler.dynamo_backend.backend)``.

The stages a learner may rewrite are public functions the pipeline calls, declared with
``tensorcraft.stages.swappable``; the modules below declare them, so importing the package makes
every name known to ``tensorcraft.substitute``:
    capture.capture, dynamo_backend.graph_from_fx      the front-ends (through builder.GraphBuilder)
    opnames.refusal                                     which calls capture must not record
    guards.check_guards, guards.check_input             is a cached entry still valid? (per input)
    passes.*: eliminate_dead_code, fold_constants, eliminate_common_subexpressions,
              fold_conv_batchnorm (and its arithmetic, fold_conv_bn), decompose, group_fusible, fuse_elementwise,
              merge_views
    passes.memory_plan.plan_memory                      liveness and buffer reuse
    codegen: python_source, c_source, triton_source     the kernel printers
    codegen.wrapper.generate_wrapper                    the Python function that runs a graph
Swapping one is ``tensorcraft.substitute(plan_memory=my_plan)``: the one way (``compile_graph`` takes
only ``passes=`` and ``backend=``).

Imports only go down, so that each stage can be read and replaced on its own (tests/compiler/test_layers.py):
    ir -> plans, functional, opnames -> builder, draw -> capture, passes/, codegen/, guards/ -> interpret
       -> training -> pipeline -> dynamo_backend -> runtime -> api
``passes/`` and ``codegen/`` never import each other (they share ``plans``), and no stage imports the
package's face (``tensorcraft`` or this module); outside the compiler they read only
``tensorcraft.trees`` (the one walker of nested values) and ``tensorcraft.stages``.

What a compiled call is guarded on and what capture refuses: ``guards`` and ``guards.values``
(module docstrings), ``capture``, and the README's compiler section.
"""
from . import api, capture, dynamo_backend, guards  # noqa: F401
from .codegen import c, python, triton, wrapper  # noqa: F401
from .passes import conv_bn, constant_folding, cse, dce, decompose, fusion, memory_plan, views  # noqa: F401
