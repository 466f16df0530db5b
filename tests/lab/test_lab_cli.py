"""`mrc lab` as a user runs it, in-process through main(): flap really flaps, bad targets
on a running lab are one-line exit-2 errors that change nothing, `up` will not overwrite."""

from __future__ import annotations

import json
import subprocess

import pytest

from labs.check import run_check
from labs.faults import Lab, read_events
from labs.state import load_state
from labs.topology import namespace
from mrc_transport.cli.main import main
from tests.conftest import CliError

pytestmark = pytest.mark.lab

FLAP_LINK = "t0-p0-0:t1-p0-1"
PERIOD = 0.3
COUNT = 3
SLACK = 0.5  # seconds a restore may take on a busy 2-core machine (it re-adds routes, SIDs)
CUT_JITTER = 0.2  # seconds a cut (one `ip link set down`) may lag its deadline


def carrier(lab: str, node: str, dev: str) -> tuple[int, int, str]:
    """(carrier down count, carrier up count, operstate) of node's dev, from the kernel.

    Read from the namespace's sysfs by `ip netns exec`: pyroute2's IPRoute(netns=) now and
    then opened its socket outside the namespace on a loaded machine (ENODEV for the dev)."""
    files = ("carrier_down_count", "carrier_up_count", "operstate")
    paths = [f"/sys/class/net/{dev}/{name}" for name in files]
    out = subprocess.run(
        ["ip", "netns", "exec", namespace(lab, node), "cat", *paths],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return int(out[0]), int(out[1]), out[2].upper()


def all_ok(lab: str) -> bool:
    return all(r.ok for r in run_check(lab, load_state(lab).topology, timeout=0.6))


def test_flap_takes_the_link_down_and_up_count_times(
    tiny_lab: str, capsys: pytest.CaptureFixture[str]
) -> None:
    link = Lab(tiny_lab).topo.link(FLAP_LINK)
    # The cut sets the lower end (the T0) admin down; the T1's end sees the carrier go.
    down0, up0, _ = carrier(tiny_lab, link.b, link.b_dev)
    argv = ["lab", "flap", FLAP_LINK, "--name", tiny_lab, "--period", str(PERIOD)]
    assert main([*argv, "--count", str(COUNT)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2 * COUNT
    down1, up1, state = carrier(tiny_lab, link.b, link.b_dev)
    assert (down1 - down0, up1 - up0) == (COUNT, COUNT)
    assert state == "UP"
    assert carrier(tiny_lab, link.a, link.a_dev)[2] == "UP"
    events = read_events(tiny_lab)
    assert [(e["kind"], e["target"], e["action"]) for e in events] == [
        ("cut", FLAP_LINK, "hard"),
        ("restore", FLAP_LINK, "up"),
    ] * COUNT
    times = [e["t_mono"] for e in events]
    # Each restore comes half a period after its cut (plus the time the restore takes to
    # re-add what admin down deleted), and the cuts keep the period: flap schedules by
    # absolute deadlines, so a slow restore on a loaded machine delays only the cut right
    # after it (which cannot start before the restore ended), never the rest.
    cuts, restores = times[::2], times[1::2]
    for cut, restore in zip(cuts, restores, strict=True):
        assert PERIOD / 2 <= restore - cut < PERIOD / 2 + SLACK
    for k in range(1, COUNT):
        start = max(cuts[0] + k * PERIOD, restores[k - 1])
        assert cuts[k] - start < CUT_JITTER, (k, times)
    assert all_ok(tiny_lab)


BAD_TARGETS: list[tuple[list[str], str]] = [
    (["cut", "h0:t1-p0-0"], "no link 'h0:t1-p0-0'"),
    (["cut", "t0-p9-0:t1-p9-0"], "no link"),
    (["cut", "nolink"], "cut takes a link (a:b), not the switch 'nolink'"),
    (["cut", "h0:t0-p0-0", "--mode"], "expected one argument"),
    (["restore", "t0-p0-0:t1-p0-7"], "no link"),
    (["restore", "t1-p5-0"], "no node 't1-p5-0'"),
    (["restore", "h9:p0"], "no node 'h9'"),
    (["restore", "h0:p7"], "is not HOST:PORT"),
    (["fail", "t1-p0-9"], "no node 't1-p0-9'"),
    (["fail", "h0"], "not the host 'h0'"),
    (["fail", "h0:p2"], "is not HOST:PORT"),
    (["fail", "h0:eth0"], "fail takes a switch or HOST:PORT, not the link 'h0:eth0'"),
    (["flap", "h0:t0-p1-1"], "no link"),
    (["flap", FLAP_LINK, "--period", "0"], "period must be > 0"),
    (["flap", FLAP_LINK, "--count", "0"], "count must be an integer >= 1"),
    (["degrade", "h0:h1", "--loss", "5"], "no link"),
    (["degrade", FLAP_LINK, "--loss", "101"], "percentage in 0..100"),
    (["degrade", "@t0-t1+h0:p1", "--loss", "5"], "unknown placeholder or group"),
    (["flap", "t0-p0-0:t1-p0-1+h0:p1"], "links joined by + are links (a:b), not 'h0:p1'"),
    (["cut", "@links"], "cut takes a link (a:b), not the group '@links'"),
    (["unfail", FLAP_LINK], "unfail takes a switch or HOST:PORT, not the link"),
    (["exec", "t2-p0-0", "--", "true"], "no node 't2-p0-0'"),
    (["exec", "h0"], "missing CMD"),
]


def test_bad_targets_are_one_line_errors_that_change_nothing(
    tiny_lab: str, cli_error: CliError
) -> None:
    for args, expected in BAD_TARGETS:
        # --name before the rest: exec's CMD takes everything after the node
        cli_error(["lab", args[0], "--name", tiny_lab, *args[1:]], expected)
    assert read_events(tiny_lab) == []
    assert all_ok(tiny_lab)


def test_up_on_an_existing_lab_needs_force(
    tiny_lab: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = load_state(tiny_lab)
    assert main(["lab", "up", "--name", tiny_lab, "--preset", "default"]) == 2
    # not cli_error: the progress bar, off a terminal, ends with a blank line before it
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"lab '{tiny_lab}' exists" in err
    assert load_state(tiny_lab) == before  # still the tiny lab, untouched
    assert all_ok(tiny_lab)


def test_one_of_two_cut_host_links_restores_alone(tiny_lab: str) -> None:
    """A host's route to the fabric prefix has a nexthop per port; restoring one port while
    another is still cut leaves the cut one out (the kernel refuses a nexthop over a device
    that is down), and restoring that one puts it back."""
    links = ["h0:t0-p0-0", "h0:t0-p1-0"]
    for link in links:
        assert main(["lab", "cut", link, "--name", tiny_lab]) == 0
    assert main(["lab", "restore", links[0], "--name", tiny_lab]) == 0
    assert fabric_route_devs(tiny_lab) == ["p0"]
    assert main(["lab", "restore", links[1], "--name", tiny_lab]) == 0
    assert fabric_route_devs(tiny_lab) == ["p0", "p1"]
    assert all_ok(tiny_lab)


def fabric_route_devs(lab: str) -> list[str]:
    """The devices of h0's route to the fabric's host prefix, from the kernel."""
    from labs.addressing import baseline_prefix

    out = subprocess.run(
        ["ip", "-n", namespace(lab, "h0"), "-j", "-6", "route", "show", baseline_prefix()],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (route,) = json.loads(out)
    hops = route.get("nexthops") or [route]
    return sorted(h["dev"] for h in hops)
