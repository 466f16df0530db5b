"""The baselines MRC is measured against, each a kind of flow of harness/tcpflow.py:

- ``tcp``: one TCP flow pinned to the ECMP path it hashed onto (SO_TXREHASH off), the
  stand-in for single-path RoCE (one UDP source port per QP, no rerouting);
- ``tcp-rehash``: the same flow as Linux runs it by default, moved to another path on
  every RTO (net.core.txrehash): the stronger single-path baseline;
- ``mptcp``: Linux MPTCP, one connection with a subflow per plane (harness/mptcp.py), what
  a Linux user who wants multipath would pick.

Each names its flows' kind in the delivery records and reports, its words in tables and
plots, its tcpflow options and the address its sender connects to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from labs import addressing
from labs.topology import Topology
from mrc_transport.harness.errors import HarnessError

FlowKind = Literal["mrc", "tcp", "tcp-rehash", "mptcp"]
BaselineKind = Literal["tcp", "tcp-rehash", "mptcp"]


@dataclass(frozen=True, slots=True)
class Baseline:
    """One kind of baseline flow."""

    kind: BaselineKind
    """Its flow kind (and the flow id where it runs once)."""
    label: str
    """Its name in a table's header or a plot's legend."""
    mptcp: bool = False
    """An MPTCP connection (tcpflow --mptcp)."""
    rehash: bool = False
    """Linux moves it on RTO (tcpflow --rehash); else it stays on its first path."""

    @property
    def single_path(self) -> bool:
        """One path at a time (TCP), not one per plane (MPTCP)."""
        return not self.mptcp

    def tcpflow_options(self) -> list[str]:
        """What both tcpflow ends are told."""
        return ["--mptcp"] if self.mptcp else ["--rehash"] if self.rehash else []

    def address(self, topo: Topology, dst: str) -> str:
        """Where the sender connects: the receiver's baseline address, which every plane
        routes (TCP: through the fabric's ECMP routes; MPTCP: each subflow through its own
        plane, docs/lab.md "MPTCP")."""
        return str(addressing.baseline_address(topo, dst))

    def source(self, topo: Topology, src: str) -> str | None:
        """The address the sender binds: MPTCP its plane-0 address, so that its first
        subflow is plane 0's (the lab's source rule routes it there) and the path manager
        adds one from each other plane; TCP none (the ECMP route's source)."""
        return str(addressing.host_address(topo, 0, src)) if self.mptcp else None

    def send_args(self, topo: Topology, src: str, dst: str, port: int) -> list[str]:
        """`tcpflow send`'s arguments but how much to send (-t or -n)."""
        source = self.source(topo, src)
        bind = ["--bind", source] if source is not None else []
        return [
            "send",
            self.address(topo, dst),
            "--port",
            str(port),
            *bind,
            *self.tcpflow_options(),
        ]

    def recv_args(self, port: int, flow: str) -> list[str]:
        """`tcpflow recv`'s arguments but where the records go."""
        return ["recv", "--port", str(port), "--flow", flow, *self.tcpflow_options()]


BASELINES: dict[str, Baseline] = {
    b.kind: b
    for b in (
        Baseline("tcp", "TCP"),
        Baseline("tcp-rehash", "TCP rehash", rehash=True),
        Baseline("mptcp", "MPTCP", mptcp=True),
    )
}
DEFAULT_BASELINES: tuple[BaselineKind, ...] = ("tcp", "tcp-rehash", "mptcp")
LABELS: dict[str, str] = {"mrc": "MRC", **{k: b.label for k, b in BASELINES.items()}}
"""Every flow kind's name in tables and plots."""


def baseline(kind: str) -> Baseline:
    """The baseline of a flow kind; KeyError for "mrc"."""
    return BASELINES[kind]


def parse_baselines(text: str) -> tuple[BaselineKind, ...]:
    """``tcp,tcp-rehash,mptcp`` -> the kinds, in that order; one-line HarnessError for an
    unknown or repeated name or none at all."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise HarnessError(f"--baselines needs at least one of {', '.join(BASELINES)}")
    out: list[BaselineKind] = []
    for name in names:
        if name not in BASELINES:
            raise HarnessError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")
        if BASELINES[name].kind in out:
            raise HarnessError(f"baseline {name!r} given twice")
        out.append(BASELINES[name].kind)
    return tuple(out)


def uses_mptcp(kinds: Sequence[str]) -> bool:
    return any(k in BASELINES and BASELINES[k].mptcp for k in kinds)
