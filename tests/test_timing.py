"""The notebooks' timing helper: medians of blocks of calls, a spread around them, readable units."""
import time

from tensorcraft.timing import Timing, spread, time_block, time_call, time_rounds


def test_a_slow_call_still_gets_enough_blocks_for_a_spread():
    calls = []
    timing = time_call(lambda: (calls.append(1), time.sleep(0.01)), min_run_time=0.02, min_blocks=5)
    assert timing.median >= 0.01  # sleep never returns early
    assert timing.low <= timing.median <= timing.high
    assert timing.calls >= 5 and len(calls) >= timing.calls  # the warm-up calls come on top


def test_the_blocks_added_for_a_spread_cost_one_block_of_calls_each():
    calls = []
    timing = time_call(lambda: (calls.append(1), time.sleep(0.05)), min_run_time=0.02, min_blocks=5)
    assert timing.calls == 5
    assert len(calls) <= 5 + 3     # torch's own sizing and first block, then one call per added block


def test_arguments_are_passed_through():
    seen = []
    time_call(seen.append, "x", min_run_time=0.001, min_blocks=1)
    assert set(seen) == {"x"}


def test_printed_in_the_unit_of_the_median():
    assert str(Timing(12.5e-6, 12e-6, 13e-6, 100)) == "12.5 µs (IQR 12–13)"
    assert str(Timing(0.25, 0.2, 0.3, 5)) == "250 ms (IQR 200–300)"
    assert str(Timing(3.0, 2.5, 3.5, 5)) == "3 s (IQR 2.5–3.5)"


def test_rounds_time_every_function_side_by_side_once_per_round():
    order = []
    fast = lambda: order.append("fast")  # noqa: E731
    slow = lambda: (order.append("slow"), time.sleep(0.005))  # noqa: E731
    times = time_rounds({"fast": fast, "slow": slow}, rounds=6)
    assert {name: len(t) for name, t in times.items()} == {"fast": 6, "slow": 6}
    assert min(times["slow"]) >= 0.005 > max(times["fast"])
    assert order.count("fast") == order.count("slow") == 6     # blocks of one call: one a round
    rounds = [order[i:i + 2] for i in range(0, 12, 2)]
    assert all(sorted(r) == ["fast", "slow"] for r in rounds)   # each round runs both, one after the other
    assert len({tuple(r) for r in rounds}) == 2                  # and not always in the same order


def test_a_block_lasts_about_the_time_asked_and_gives_seconds_per_call():
    calls = []
    times = time_rounds({"f": lambda: (calls.append(1), time.sleep(0.001))}, rounds=3, block_s=0.1)
    assert len(calls) >= 1 + 3 * 2          # one call sizes the blocks; then many a block of 100 ms, not one
    assert all(0.001 <= t < 0.05 for t in times["f"])


def test_block_is_seconds_per_call():
    assert 0.003 <= time_block(lambda: time.sleep(0.003), calls=4) < 0.03


def test_spread_is_the_median_with_its_quartiles():
    timing = spread([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (timing.median, timing.low, timing.high, timing.calls) == (3.0, 2.0, 4.0, 5)
