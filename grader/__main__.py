"""python -m grader build | check | autograde | feedback"""
import sys

from .cli import main

sys.exit(main())
