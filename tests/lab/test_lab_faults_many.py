"""Faults on many links at once (what `mrc repro` plays): degrade every link in one batch and
take it off again; restore two cut links of one host together, which one by one fails."""

from __future__ import annotations

import subprocess

import pytest

from labs.check import ProbeResult, run_check
from labs.faults import Lab, read_events
from labs.topology import namespace

pytestmark = pytest.mark.lab


def _failed(lab: Lab) -> set[tuple[str, str, int, tuple[str, ...], str]]:
    results: list[ProbeResult] = run_check(lab.name, lab.topo, timeout=0.6)
    return {(r.src, r.dst, r.plane, r.hops, r.encoding) for r in results if not r.ok}


def _nft(lab: str, node: str) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", namespace(lab, node), "nft", "list", "ruleset"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_degrade_many_puts_loss_on_every_end_and_takes_it_off(tiny_lab: str) -> None:
    lab = Lab(tiny_lab)
    links = [ln.name for ln in lab.topo.links]
    lab.degrade_many(links, 100, "@links")
    for node in lab.topo.nodes:
        rules = _nft(tiny_lab, node)
        for dev, _peer, _link in lab.topo.ports(node):
            assert f'device "{dev}"' in rules, (node, dev)
    assert _failed(lab)  # every path crosses a link that drops everything
    lab.degrade_many(links, 0.5, "@links")  # replaced, not added to
    assert "< 5000 drop" in _nft(tiny_lab, "t1-p0-0")
    assert "drop" not in _nft(tiny_lab, "t1-p0-0").replace("< 5000 drop", "")
    lab.degrade_many(links, 0, "@links")
    assert all("loss_" not in _nft(tiny_lab, node) for node in lab.topo.nodes)
    assert _failed(lab) == set()
    events = [(e["kind"], e["target"], e["action"]) for e in read_events(tiny_lab)]
    assert events == [
        ("degrade", "@links", "loss 100%"),
        ("degrade", "@links", "loss 0.5%"),
        ("restore", "@links", "no loss"),
    ]


def test_two_links_of_one_host_restore_one_by_one_or_together(tiny_lab: str) -> None:
    lab = Lab(tiny_lab)
    both = ["h0:t0-p0-0", "h0:t0-p1-0"]
    for link in both:
        lab.cut(link, "hard")
    # one alone re-adds h0's ECMP route over its port only while the other is down (the
    # kernel refuses a nexthop over a device that is down); then both together
    lab.restore(both[0])
    lab.restore_many(both)
    assert _failed(lab) == set()
    flapped = lab.flap_many(both, period=0.4, count=2)
    assert [(e.kind, e.target) for e in flapped] == 2 * [
        ("cut", both[0]),
        ("cut", both[1]),
        ("restore", both[0]),
        ("restore", both[1]),
    ]
    assert _failed(lab) == set()
