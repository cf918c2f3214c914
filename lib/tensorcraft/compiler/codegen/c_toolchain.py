"""Turn C source into a loaded shared library, once per machine: compile with the system C
compiler, cache the .so on disk under a hash of everything that decides its bytes, load with ctypes.

A second process (or a second run of a notebook) finds the library on disk and pays no compile.
The cache key holds the source, the compiler and its flags, and this machine's CPU: the flags
include ``-march=native``, so a library built here may not run on an older CPU sharing the cache.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from tensorcraft.compiler.codegen.backends import BackendUnavailable

# Why these flags (measured on the 16M-element benchmarks in benchmarks/compile.py):
#  -O3 -march=native   vectorise for this CPU (AVX2/AVX-512), which the cache key then includes;
#  -fopenmp            `#pragma omp parallel for` over rows and `#pragma omp simd` on inner loops;
#  -fno-math-errno     sqrt becomes one instruction and math calls may be vectorised: errno is never read;
#  -fno-trapping-math  lets conditionals (relu, maximum) become vector blends;
#  -ffp-contract=off   no fused multiply-add: a*b+c rounds twice, as in eager PyTorch.
# No -ffast-math: NaN, infinities and signed zeros keep their IEEE meaning. Vector exp/log/tanh/...
# come from glibc's libmvec (declared `omp declare simd` in the generated source), accurate to 4 ulp.
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
         "-ffp-contract=off", "-fPIC", "-shared")
LIBS = ("-lm",)


class CompilerUnavailable(BackendUnavailable):
    """No working C compiler with OpenMP (or, for Triton, no triton): callers fall back to another backend."""


class CCompileError(RuntimeError):
    """The compiler works but rejected generated source: a bug in the generator."""


# Counts compiler invocations in this process, so tests can tell a cache hit from a compile.
compile_count = 0
_loaded: dict[str, ctypes.CDLL] = {}


def cache_dir() -> Path:
    """``$TENSORCRAFT_CACHE_DIR`` or ``~/.cache/tensorcraft``; C libraries go under ``c/``."""
    root = os.environ.get("TENSORCRAFT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tensorcraft")
    return Path(root)


def compiler_command() -> list[str]:
    """The compiler to run: ``$CC`` (may carry words, e.g. "ccache gcc"), else cc, else gcc."""
    cc = os.environ.get("CC")
    words = shlex.split(cc) if cc else [shutil.which("cc") or shutil.which("gcc") or "cc"]
    if not words or shutil.which(words[0]) is None:
        where = f"CC={cc!r}" if cc else "cc or gcc on PATH"
        raise CompilerUnavailable(f"no C compiler found ({where} does not name an executable); "
                                  "install gcc or set CC to a C compiler with OpenMP support")
    return words


@lru_cache(maxsize=None)
def _machine_fingerprint() -> str:
    """What -march=native depends on: the CPU model and feature flags."""
    text = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    text += line
                if line.strip() == "":   # the first CPU is enough
                    break
    except OSError:
        pass
    return text


def _compiler_identity(words: list[str]) -> str:
    path = shutil.which(words[0]) or words[0]
    st = os.stat(path)
    return f"{' '.join(words)}|{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}"


def library_key(source: str, words: list[str]) -> str:
    text = "\0".join([source, _compiler_identity(words), *FLAGS, *LIBS, _machine_fingerprint()])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def load_library(source: str) -> ctypes.CDLL:
    """Compile ``source`` (or find it compiled in the cache) and load it."""
    global compile_count
    words = compiler_command()
    key = library_key(source, words)
    if key in _loaded:
        return _loaded[key]
    folder = cache_dir() / "c"
    library = folder / f"{key}.so"
    if not library.exists():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CompilerUnavailable(f"cannot create the kernel cache folder {folder} ({error}); set "
                                      "TENSORCRAFT_CACHE_DIR to a writable folder") from error
        # Build in a private folder, then rename into place: a process compiling the same kernel at
        # the same time never reads half a source file, and nobody ever loads half a library.
        with tempfile.TemporaryDirectory(dir=folder) as work:
            source_path, built = Path(work) / f"{key}.c", Path(work) / f"{key}.so"
            source_path.write_text(source)
            command = [*words, *FLAGS, "-o", str(built), str(source_path), *LIBS]
            compile_count += 1
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                kept = folder / f"{key}.failed.c"
                os.replace(source_path, kept)
                _raise_for_failure(words, command, result.stderr, kept)
            os.replace(source_path, folder / f"{key}.c")   # kept beside the library, to be read
            os.replace(built, library)
    _loaded[key] = ctypes.CDLL(str(library))
    return _loaded[key]


def _raise_for_failure(words: list[str], command: list[str], stderr: str, source_path: Path) -> None:
    """Tell a missing toolchain (no OpenMP, broken compiler) from a bad generated source."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.c"
        probe.write_text("#include <math.h>\nint probe(double x) {\n#pragma omp parallel for\n"
                         "for (int i = 0; i < 4; i++) x += sqrt(x);\nreturn (int)x; }\n")
        ok = subprocess.run([*words, *FLAGS, "-o", str(Path(tmp) / "probe.so"), str(probe), *LIBS],
                            capture_output=True).returncode == 0
    if not ok:
        raise CompilerUnavailable(f"the C compiler {' '.join(words)!r} cannot build an OpenMP shared "
                                  f"library with {' '.join(FLAGS)}:\n{stderr.strip()}")
    raise CCompileError(f"generated C did not compile ({source_path}):\n$ {shlex.join(command)}\n{stderr.strip()}")
