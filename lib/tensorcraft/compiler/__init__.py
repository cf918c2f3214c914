"""A small torch.compile: capture -> passes -> memory planning -> codegen -> runtime.

Public entry points: ``tensorcraft.compile`` (``api.compile``) and ``dynamo_backend.backend``, a
backend for ``torch.compile(model, backend=tensorcraft.compiler.dynamo_backend.backend)``.
Submodules are imported on use: ``import tensorcraft.compiler`` costs nothing.
"""
