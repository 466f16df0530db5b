"""`mrc demo` without root: bad flags, bad schedule files, bad targets and bad hosts give one
line on stderr and exit 2, and never build a lab (labs.apply.up fails the test). Also the
pure pieces of the demos: which MRC paths a fault kills, flap labelling, the permutation,
window rates."""

from __future__ import annotations

from pathlib import Path

import pytest

from labs.faultkinds import Flap
from labs.paths import paths
from labs.topology import preset
from mrc_transport.demo.collisions import reshape
from mrc_transport.demo.failover import (
    MRC_EVENTS,
    MRC_SERVER_EVENTS,
    FailoverConfig,
    baseline_recv_argv,
    baseline_send_argv,
    mrc_client_argv,
    mrc_server_argv,
)
from mrc_transport.demo.failover_analysis import surviving_fraction
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.paths import path_killed
from mrc_transport.harness.patterns import permutation, pick_hosts
from mrc_transport.harness.schedule import Step, label_flaps
from mrc_transport.harness.timeline import Delivery, FaultWindow
from mrc_transport.harness.windows import window_rates
from tests.conftest import CliError

pytestmark = pytest.mark.usefixtures("no_lab")  # no state outside tmp_path, no lab built


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["demo"], ["missing DEMO"]),
        (["demo", "failover", "--preset", "huge"], ["invalid choice"]),
        (["demo", "failover", "--duration", "-3"], ["--duration"]),
        (["demo", "failover", "--duration", "abc"], ["not a number"]),
        (["demo", "failover", "--duration", "1.5"], ["--duration must be more than"]),
        (["demo", "failover", "--name", "bad name!"], ["--name"]),
        (["demo", "failover", "--preset", "tiny", "--topology", "x.yaml"], ["not allowed"]),
        (["demo", "failover", "--bogus"], ["unrecognized"]),
        (["demo", "failover", "--preset", "tiny", "--from", "h0", "--to", "h1"], ["share a rack"]),
        (["demo", "failover", "--preset", "tiny", "--from", "h9"], ["no host 'h9'"]),
        (["demo", "failover", "--baselines", "tcp,quic"], ["unknown baseline 'quic'"]),
        (["demo", "failover", "--baselines", "tcp,tcp"], ["baseline 'tcp' given twice"]),
        (["demo", "failover", "--baselines", ","], ["--baselines needs at least one"]),
        (
            ["demo", "failover", "--baselines", "mptcp"],
            ["names @", "add tcp or tcp-rehash to --baselines"],
        ),
        (["demo", "collisions", "--planes", "-1"], [">= 0"]),
        (["demo", "collisions", "--preset", "nope"], ["invalid choice"]),
    ],
)
def test_bad_flags_are_one_line_exit_2(
    argv: list[str], words: list[str], cli_error: CliError
) -> None:
    cli_error(argv, *words)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("- {at: 2, action: explode, target: a:b}\n", ["step 1", "unknown action"]),
        ("- {at: 2, action: cut, target: '@tcp-link', mode: soft}\n", ["mode"]),
        ("- {at: -1, action: cut, target: '@tcp-link'}\n", [">= 0"]),
        ("- {at: 1, action: fail, target: '@tcp-link'}\n", ["takes a switch"]),
        ("- [1, 2\n", ["invalid YAML"]),
        ("{}\n", ["non-empty list"]),
        ("- {at: 1, action: cut, target: 't0-p0-0:t1-p0-9'}\n", ["t0-p0-0:t1-p0-9"]),
        ("- {at: 1, action: fail, target: t1-p7-0}\n", ["t1-p7-0"]),
        ("- {at: 1, action: fail, target: 'h0:p5'}\n", ["h0"]),
    ],
)
def test_bad_schedule_file_is_one_line_exit_2(
    tmp_path: Path, text: str, words: list[str], cli_error: CliError
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    cli_error(["demo", "failover", "--preset", "tiny", "--schedule", str(path)], *words)


def test_missing_schedule_file_is_one_line_exit_2(tmp_path: Path, cli_error: CliError) -> None:
    cli_error(["demo", "failover", "--schedule", str(tmp_path / "none.yaml")], "none.yaml")


def test_valid_input_without_root_says_root(
    tmp_path: Path, cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    cli_error(["demo", "failover", "--preset", "tiny", "--out", str(tmp_path)], "root")


# -- pure pieces --------------------------------------------------------------------------


def test_pick_hosts_defaults_cross_racks() -> None:
    topo = preset("default")
    src, dst = pick_hosts(topo, None, None)
    assert (src, dst) == ("h4", "h0")
    assert topo.rack_of(src) != topo.rack_of(dst)
    assert pick_hosts(preset("tiny"), "h3", "h0") == ("h3", "h0")
    with pytest.raises(HarnessError, match="share a rack"):
        pick_hosts(topo, "h0", "h1")


def _fault(kind: str, target: str) -> FaultWindow:
    return FaultWindow(kind, target, "x", 1.0, 2.0)


def test_surviving_fraction_counts_paths_a_fault_kills() -> None:
    topo = preset("default")  # 4 planes x 4 T1 = 16 paths h4 -> h0
    frac = surviving_fraction(topo, "h4", "h0")
    assert len(paths(topo, "h4", "h0")) == 16
    assert frac(_fault("cut", "t0-p1-1:t1-p1-1"), "mrc") == 15 / 16  # the source T0's uplink
    assert frac(_fault("cut", "t0-p1-0:t1-p1-1"), "mrc") == 15 / 16  # the receiving T0's
    assert frac(_fault("cut", "t0-p1-0:t1-p1-1"), "tcp") == 1.0
    assert frac(_fault("fail", "t1-p2-0"), "mrc") == 15 / 16
    assert frac(_fault("fail", "t0-p2-0"), "mrc") == 12 / 16  # a whole plane
    assert frac(_fault("fail", "h4:p3"), "mrc") == 12 / 16
    assert frac(_fault("fail", "h1:p3"), "mrc") == 1.0  # another host's port
    assert frac(_fault("degrade", "t0-p1-1:t1-p1-1"), "mrc") == 1.0
    assert frac(_fault("cut", "h4:t0-p0-1"), "mrc") == 12 / 16  # the sender's plane-0 cable
    assert frac(_fault("cut", "t0-p1-0:t1-p1-2"), "mrc") == 15 / 16


def test_path_killed_by_flap_on_its_link() -> None:
    topo = preset("tiny")
    p = paths(topo, "h2", "h0")[0]
    link = f"{p.hops[0]}:{p.hops[1]}"
    assert path_killed(_fault("flap", link), "h2", "h0", p)
    assert not path_killed(_fault("degrade", link), "h2", "h0", p)


def test_label_flaps_renames_only_cycles_inside_the_flap() -> None:
    link = "t0-p0-0:t1-p0-1"
    flap = Step(5.0, Flap(link, 0.5, 2))
    faults = [
        FaultWindow("cut", link, "hard", 1.0, 2.0),
        FaultWindow("cut", link, "hard", 5.1, 5.3),
        FaultWindow("cut", link, "hard", 5.6, 5.8),
        FaultWindow("cut", "t0-p0-1:t1-p0-1", "gray", 5.6, 5.9),
    ]
    out = label_flaps(faults, [(flap, 5.05, 6.1)])
    assert [f.kind for f in out] == ["cut", "flap", "flap", "cut"]
    assert [f.action for f in out] == ["hard", "cycle 1/2", "cycle 2/2", "gray"]


def test_permutation_every_host_sends_once_and_receives_once() -> None:
    for name in ("tiny", "default", "large"):
        topo = preset(name)
        pairs = permutation(topo)
        senders, receivers = [s for s, _ in pairs], [d for _, d in pairs]
        rack01 = topo.hosts_in_rack(0) + topo.hosts_in_rack(1)
        assert sorted(senders) == sorted(rack01) == sorted(receivers)
        assert all(topo.rack_of(s) != topo.rack_of(d) for s, d in pairs)
        assert not any((d, s) in pairs for s, d in pairs)


def test_window_rates_count_only_the_window() -> None:
    ds = [
        Delivery(0.5, 1000, "a"),
        Delivery(1.5, 1000, "a"),
        Delivery(1.9, 500, "b"),
        Delivery(3.0, 1000, "a"),
    ]
    rates = window_rates(ds, ["a", "b", "c"], 1.0, 2.0)
    assert rates == {"a": 8000.0, "b": 4000.0, "c": 0.0}
    with pytest.raises(HarnessError):
        window_rates(ds, ["a"], 2.0, 2.0)


def test_reshape_keeps_or_replaces() -> None:
    topo = preset("default")
    one = reshape(topo, 1, 20_000_000)
    assert one.planes == 1
    assert one.host_link.rate_bps == one.fabric_link.rate_bps == 20_000_000
    assert reshape(topo, 0, 0) == topo


def test_children_argv_write_where_the_analysis_reads(tmp_path: Path) -> None:
    cfg = FailoverConfig(preset("tiny"), "t1", (), 20.0, tmp_path)

    def after(argv: list[str], flag: str) -> str:
        return argv[argv.index(flag) + 1]

    server, client = mrc_server_argv(cfg), mrc_client_argv(cfg, "h0")
    assert after(server, "--records") == str(tmp_path / "mrc.jsonl")
    assert after(server, "--events") == str(tmp_path / MRC_SERVER_EVENTS)
    assert after(client, "--events") == str(tmp_path / MRC_EVENTS)
    assert after(client, "-t") == "20.000"
    assert after(client, "-p") == after(server, "-p")
    for i, kind in enumerate(("tcp", "tcp-rehash", "mptcp")):
        recv, send = baseline_recv_argv(cfg, kind), baseline_send_argv(cfg, kind, "h2", "h0")
        assert after(recv, "--records") == str(tmp_path / f"{kind}.jsonl")
        assert after(recv, "--flow") == kind
        assert after(recv, "--port") == after(send, "--port") == str(5201 + i)
        assert float(after(send, "-t")) > cfg.duration  # outlives MRC
    mptcp = baseline_send_argv(cfg, "mptcp", "h2", "h0")
    assert "--mptcp" in mptcp
    assert after(mptcp, "send") == "fd00:6d72:a000::"  # h0's address in every plane
    assert after(mptcp, "--bind") == "fcbb:bb00:a002::"  # from h2's plane 0: the first subflow
    assert "--rehash" in baseline_recv_argv(cfg, "tcp-rehash")
    assert "--rehash" not in baseline_send_argv(cfg, "tcp", "h2", "h0")  # pinned
    assert "--bind" not in baseline_send_argv(cfg, "tcp", "h2", "h0")


def test_a_kernel_without_mptcp_is_one_line_before_any_lab(
    cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("labs.kernel.has_mptcp", lambda: False)
    cli_error(
        ["demo", "failover", "--preset", "tiny"], "this kernel has no MPTCP", "--baselines tcp"
    )
    cli_error(
        ["demo", "collisions", "--preset", "tiny", "--baselines", "mptcp"],
        "this kernel has no MPTCP",
    )
