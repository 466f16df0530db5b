"""The collisions demo measures every flow over the span in which all of them ran."""

from __future__ import annotations

from mrc_transport.harness.timeline import Delivery
from mrc_transport.harness.windows import TAIL_S, WARMUP_S, common_window, window_rates


def _flow(name: str, t0: float, t1: float, step: float = 0.1) -> list[Delivery]:
    n = round((t1 - t0) / step)
    return [Delivery(t0 + i * step, 1000, name) for i in range(n + 1)]


def test_window_starts_after_the_last_flow_starts_and_ends_before_the_first_ends() -> None:
    ds = _flow("a", 10.0, 20.0) + _flow("b", 12.0, 19.0) + _flow("other", 0.0, 30.0)
    t0, t1 = common_window(ds, ["a", "b", "idle"], t_start=10.0, t_end=18.0)
    assert (t0, t1) == (12.0 + WARMUP_S, 19.0 - TAIL_S)


def test_a_late_starter_is_not_charged_for_its_start_up() -> None:
    # both flows deliver 10 kB/s once running; b starts 2 s after the launch
    ds = _flow("a", 10.0, 20.0) + _flow("b", 12.0, 20.0)
    rates = window_rates(ds, ["a", "b"], *common_window(ds, ["a", "b"], 10.0, 20.0))
    assert abs(rates["a"] - rates["b"]) <= 0.1 * rates["a"]
    assert abs(rates["b"] - 80_000.0) <= 0.1 * 80_000.0


def test_no_deliveries_falls_back_to_the_launch_window() -> None:
    assert common_window([], ["a"], 5.0, 15.0) == (5.0 + WARMUP_S, 15.0 - TAIL_S)
