"""Code generation: every generator reads a codegen.kernel.Kernel.

    kernel     the contract (Kernel, Stmt, Output; ``evaluate`` is its meaning in torch ops)
    layout     the collapsed loop structure printers share
    printer    what the C and Triton printers share (identifiers, statements, argument checks)
    literals   every number printed into source, spelled in one place
    python / c (+ c_toolchain) / triton    one backend each: ``compile_kernel(kernel)``
    backends   backends by name; wrapper: the Python function that runs a whole graph
"""
