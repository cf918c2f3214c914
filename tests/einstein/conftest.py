"""Make the shared strategies (einstein_cases.py) importable from the tests beside it."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
