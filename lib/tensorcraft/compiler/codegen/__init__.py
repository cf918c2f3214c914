"""Code generation: one module per target language, all reading codegen.kernel.Kernel."""
