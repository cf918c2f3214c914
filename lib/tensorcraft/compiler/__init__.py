"""A small torch.compile: capture -> passes -> memory planning -> codegen -> runtime."""
