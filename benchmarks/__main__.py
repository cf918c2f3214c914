"""`python -m benchmarks NAME [args]`: run one benchmark module (benchmarks/NAME.py)."""
import importlib
import pkgutil
import sys

import benchmarks


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    names = available()
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in names:
        print(f"usage: python -m benchmarks {{{'|'.join(names)}}} [args]")
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    module = importlib.import_module(f"benchmarks.{argv[0]}")
    return module.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
