"""bench/perf.py's unshaped report from fake measurements, without a lab: rounds
interleaved (MRC and iperf3 UDP back to back, each first in turn), medians of each
measurement, and the ratios as medians of the rounds' ratios."""

from __future__ import annotations

import re
from types import ModuleType

import pytest

from tests.unit.test_bench_perf_guard import _load

GOODPUT = {"mrc": 3e9, "udp": 4e9, "tcp": 8e9, "floor": 6e9, "gso": 9e9, "enc": 5e9}


def _fake(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, list[str]]:
    """bench/perf.py with its lab and measurements replaced: each measurement says its
    GOODPUT, 1 CPU second of both ends, 0.5 of each side, 0.25 of the sender's user space;
    the calls in order."""
    perf = _load(monkeypatch, "perf")
    calls: list[str] = []

    def sides(key: str) -> object:
        calls.append(key)
        return perf.Sides(GOODPUT[key], 1.0, 0.5, 0.5, 0.25)

    monkeypatch.setattr(perf, "up", lambda topo, lab: None)
    monkeypatch.setattr(perf, "down", lambda lab: None)
    monkeypatch.setattr(perf, "mrc", lambda *a: sides("mrc"))
    monkeypatch.setattr(perf, "iperf3", lambda *a, udp: sides("udp" if udp else "tcp"))
    monkeypatch.setattr(
        perf,
        "floor",
        lambda *a, gso=0, encode=False: sides("gso" if gso else "enc" if encode else "floor"),
    )
    monkeypatch.setattr(perf, "_machine_busy", lambda: 0.0)
    return perf, calls


@pytest.mark.parametrize("repeat", [1, 2])
def test_unshaped_prints_medians_and_ratios(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repeat: int
) -> None:
    perf, calls = _fake(monkeypatch)
    perf.unshaped(2.0, repeat)
    out = capsys.readouterr().out
    one_round = ["tcp", "floor", "gso", "enc"]
    assert calls[:6] == ["mrc", "udp", *one_round]
    if repeat == 2:
        assert calls[6:] == ["udp", "mrc", *one_round]
    assert len(re.findall(r"^  run \d: ", out, re.M)) == (repeat if repeat > 1 else 0)
    for name in perf.NAMES.values():
        assert re.search(rf"^    {re.escape(name)} +\s[ \d.]+ Gbit/s ", out, re.M), name
    assert "MRC / iperf3 UDP = 0.750" in out
    assert "MRC / raw floor  = 0.500" in out
    assert "MRC / iperf3 TCP = 0.375" in out
    # the same CPU over less goodput: MRC's per Gbit is 4/3 of iperf3 UDP's on each side
    assert out.count("MRC / iperf3 UDP, ") == 2
    assert "sender: 1.33x" in out
    assert "receiver: 1.33x" in out
    assert "note:" not in out  # nothing else was busy
