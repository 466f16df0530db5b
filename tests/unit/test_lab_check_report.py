"""`mrc lab check`'s report of failed probes: both directions, a count of the rest, a legend."""

from __future__ import annotations

from labs.check import ProbeResult, fail_lines, matrix


def _probe(src: str, dst: str, i: int, ok: bool) -> ProbeResult:
    links = ("h0:t0-p0-0", f"t0-p0-0:t1-p0-{i % 2}", "t0-p0-1:t1-p0-1")
    return ProbeResult(src, dst, 0, ("t0-p0-0", "t1-p0-1"), "usid", ok, links)


def test_fail_lines_show_both_directions_and_count_the_rest() -> None:
    results = [_probe("h0", "h2", i, False) for i in range(32)]
    results += [_probe("h2", "h0", i, False) for i in range(32)]
    results += [_probe("h0", "h1", 0, True)]
    lines = fail_lines(results, limit=20)
    fails = [ln for ln in lines if ln.startswith("FAIL")]
    assert len(fails) == 20
    assert any("h0->h2" in ln for ln in fails)
    assert any("h2->h0" in ln for ln in fails)
    assert "... and 44 more" in lines[20]


def test_fail_lines_name_the_link_every_failed_path_crosses() -> None:
    results = [_probe("h0", "h2", i, False) for i in range(4)]
    assert fail_lines(results)[-1] == "every failed path crosses h0:t0-p0-0, t0-p0-1:t1-p0-1"
    assert fail_lines([_probe("h0", "h2", 0, True)]) == []


def test_matrix_explains_fn_m_only_when_something_failed() -> None:
    good = [_probe("h0", "h2", 0, True), _probe("h0", "h2", 1, True)]
    assert "n of the pair's m probes" not in matrix(good, ("h0", "h2"))
    bad = [*good, _probe("h0", "h2", 2, False)]
    table = matrix(bad, ("h0", "h2"))
    assert "F1/3" in table
    assert "n of the pair's m probes failed" in table
