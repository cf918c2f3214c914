"""The notebooks' timing helper: medians of blocks of calls, a spread around them, readable units."""
import time

from tensorcraft.timing import Timing, time_call


def test_a_slow_call_still_gets_enough_blocks_for_a_spread():
    calls = []
    timing = time_call(lambda: (calls.append(1), time.sleep(0.01)), min_run_time=0.02, min_blocks=5)
    assert timing.median >= 0.01  # sleep never returns early
    assert timing.low <= timing.median <= timing.high
    assert timing.calls >= 5 and len(calls) >= timing.calls  # the warm-up calls come on top


def test_arguments_are_passed_through():
    seen = []
    time_call(seen.append, "x", min_run_time=0.001, min_blocks=1)
    assert set(seen) == {"x"}


def test_printed_in_the_unit_of_the_median():
    assert str(Timing(12.5e-6, 12e-6, 13e-6, 100)) == "12.5 µs (IQR 12–13)"
    assert str(Timing(0.25, 0.2, 0.3, 5)) == "250 ms (IQR 200–300)"
    assert str(Timing(3.0, 2.5, 3.5, 5)) == "3 s (IQR 2.5–3.5)"
