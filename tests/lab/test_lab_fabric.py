"""The tiny lab end to end: every path in every encoding, faults kill exactly the paths
through them, restore brings them back, baseline TCP crosses the fabric."""

from __future__ import annotations

import socket
import threading

import pytest

from labs import addressing, netns
from labs.check import ProbeResult, run_check
from labs.faultkinds import Fail, Restore
from labs.faults import Lab, read_events
from labs.paths import paths
from labs.topology import namespace

pytestmark = pytest.mark.lab


def _check(lab: Lab) -> list[ProbeResult]:
    return run_check(lab.name, lab.topo, timeout=0.6)


def _failed(results: list[ProbeResult]) -> set[tuple[str, str, int, tuple[str, ...], str]]:
    return {(r.src, r.dst, r.plane, r.hops, r.encoding) for r in results if not r.ok}


def _through(
    results: list[ProbeResult], link: str
) -> set[tuple[str, str, int, tuple[str, ...], str]]:
    return {(r.src, r.dst, r.plane, r.hops, r.encoding) for r in results if link in r.links}


def test_every_path_works_in_every_encoding(tiny_lab: str) -> None:
    lab = Lab(tiny_lab)
    results = _check(lab)
    hosts = lab.topo.hosts
    expected = 3 * sum(len(paths(lab.topo, s, d)) for s in hosts for d in hosts if s != d)
    assert len(results) == expected
    assert {r.encoding for r in results} == {"usid", "srh", "encap"}
    assert [r for r in results if not r.ok] == []


@pytest.mark.parametrize("mode", ["hard", "gray"])
@pytest.mark.parametrize("link", ["t0-p0-0:t1-p0-1", "h3:t0-p1-1"])
def test_cut_kills_exactly_the_paths_through_the_link(tiny_lab: str, mode: str, link: str) -> None:
    lab = Lab(tiny_lab)
    lab.cut(link, mode)  # type: ignore[arg-type]
    results = _check(lab)
    assert _failed(results) == _through(results, link)
    assert _failed(results)  # the link carries paths: the test can fail
    lab.restore(link)
    assert _failed(_check(lab)) == set()
    kinds = [(e["kind"], e["target"], e["action"]) for e in read_events(tiny_lab)]
    assert kinds == [("cut", link, mode), ("restore", link, "up")]
    assert all(e["t_mono"] > 0 and e["t_wall"] > 1e9 for e in read_events(tiny_lab))


def test_fail_switch_and_port(tiny_lab: str) -> None:
    lab = Lab(tiny_lab)
    t1 = Fail("t1-p1-0")
    t1.apply(lab)
    results = _check(lab)
    assert _failed(results) == {
        (r.src, r.dst, r.plane, r.hops, r.encoding) for r in results if "t1-p1-0" in r.hops
    }
    t1.undo(lab)
    Fail("h2:p0").apply(lab)
    results = _check(lab)
    assert _failed(results) == {
        (r.src, r.dst, r.plane, r.hops, r.encoding)
        for r in results
        if r.plane == 0 and "h2" in (r.src, r.dst)
    }
    Restore("h2:p0").apply(lab)  # a restore undoes a fail too, as `mrc lab restore` does
    assert _failed(_check(lab)) == set()


def test_degrade_full_loss_then_off(tiny_lab: str) -> None:
    lab = Lab(tiny_lab)
    link = "t0-p1-0:t1-p1-1"
    lab.degrade(link, 100)
    results = _check(lab)
    assert _failed(results) == _through(results, link)
    lab.degrade(link, 0)
    assert _failed(_check(lab)) == set()


def test_baseline_tcp_crosses_the_fabric_over_ecmp(tiny_lab: str) -> None:
    lab = Lab(tiny_lab)
    dst = str(addressing.baseline_address(lab.topo, "h3"))
    with netns.entered(namespace(tiny_lab, "h3")):
        srv = socket.create_server((dst, 5201), family=socket.AF_INET6)
    with netns.entered(namespace(tiny_lab, "h0")):
        cli = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            got.append(conn.recv(64))

    t = threading.Thread(target=serve)
    t.start()
    try:
        cli.settimeout(3)
        cli.connect((dst, 5201))
        cli.sendall(b"over the fabric")
        cli.close()
        t.join(5)
    finally:
        srv.close()
    assert got == [b"over the fabric"]
