"""A small torch.compile: capture -> passes -> memory planning -> codegen -> runtime.

Public entry points: ``tensorcraft.compile`` (api.compile) and ``dynamo_backend``, a backend for
``torch.compile(model, backend=tensorcraft.compiler.dynamo_backend)``. The function is bound
here under its module's name, so that this spelling hands torch.compile a callable.
"""
from .dynamo_backend import dynamo_backend  # noqa: F401
