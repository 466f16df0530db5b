"""Every tunable of the protocol core, with where its default comes from.

Sources: "paper" = the MRC/SRv6 paper and the MRC transport paper; "OCP" = the OCP MRC 1.0
API headers and examples (mrc.h, mrc_ctl.h, examples/); "UEC" = the UEC 1.0 transport
specification (NSCC, section 3.6.13); "htsim" = the UET simulator's defaults (uet-htsim's
uec.cpp); "RFC n" = that RFC; "ours" = a choice of this project where no published value
exists, usually because a userspace stack over the Linux kernel runs at RTTs of ~100 us
to 10 ms rather than a NIC's few microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

GO_BACK_N: Final = "go-back-n"
"""``Config.recovery`` of the emulated RoCE reliable connection."""
RECOVERIES: Final = ("sack", GO_BACK_N)


@dataclass(frozen=True, slots=True)
class Config:
    """Tunables of one endpoint; every connection of the endpoint shares them."""

    mss: int = 1200
    """Largest data payload per packet (ours: fits a 1500-byte link with IPv6, UDP, the MRC
    header and an SRH of up to 8 segments)."""
    ev_count: int = 128
    """Active EVs per connection, spread equally over the planes (paper: 128-256)."""
    ev_backup: int = 32
    """Backup EVs per connection, spread equally over the planes (ours)."""
    ev_min_active: int = 4
    """Floor of usable EVs: below it losses no longer retire EVs (OCP mrc_ctl.h's
    ``ev_min_active``; value ours)."""
    skip_rotations: int = 1
    """Rotations of the active set an EV stays in SKIP after ECN or a trim (paper: one)."""
    readmit_probes: int = 1
    """Consecutive clean probe replies (no ECN echo) that readmit an ASSUMED_BAD EV (UEC /
    MRC: one; 3, the project's former default, is an option)."""
    path_fail_threshold: int = 3
    """EVs of one SRv6 path retired in a row (no clean ack between) that retire every EV on
    that path: the core knows the EV -> path map, so one dead link costs a few packets, not
    one per EV (ours)."""
    scheduler: str = "random"
    """Spraying scheduler name: "random" (paper), "rr", "reps" (UET REPS)."""
    cc: str = "nscc"
    """Congestion control name: "nscc" (UEC 1.0 section 3.6.13, htsim's constants),
    "nscc-lab" (the project's NSCC before issue 39, for comparison) or "fixed"."""
    trimming: bool = False
    """The fabric trims instead of dropping: NSCC's target is then 0.75 base RTT and a
    delay no longer triggers a quick adapt (htsim ``initNsccParams``)."""
    no_trim: bool = False
    """Send data in the no-trim class (DSCP_NO_TRIM), which a trimming switch drops above
    its threshold instead of cutting it to a stub: loss detection finds those losses, as
    on a fabric without trimming. Otherwise new data goes in DSCP_DATA and
    retransmissions in DSCP_RTX, both trimmable (docs/protocol.md, "Traffic classes")."""
    cc_scope: str = "connection"
    """"connection": one window for the whole connection and the planes loaded exactly
    equally (UEC / MRC; the paper's section 4 keeps the planes' load equal to avoid false
    incast); "plane": a window per plane, each sized for its port, a full plane skipped
    and the planes weighted by their usable EVs and ECN marks (ours, cc/planes.py)."""
    recovery: str = "sack"
    """"sack": MRC's selective recovery (the receiver places out of order, the sender
    resends what SACKs say is missing); "go-back-n": RoCE's reliable connection, emulated
    as the paper's baseline: the receiver takes packets only in PSN order, NAKs the first
    one out of order (a sequence error) and drops what follows, and the sender resends
    everything from the NAKed PSN; EVs are never retired, so with ``ev_count`` 1 the
    connection stays on its one path as RoCE's hashed flow does (InfiniBand spec 9.7.5)."""
    fixed_window: int = 256 * 1024
    """Window of the "fixed" congestion control, bytes (ours)."""
    nic_rate_bps: float = 100e9
    """Sending rate of the NIC over all planes, for the BDP that bounds NSCC's window
    (paper: 800G NICs as 8 x 100G; set it to the lab's real rate)."""
    max_burst: int = 4096
    """Data packets one ``datagrams_to_send`` call returns per connection (ours: a
    simulated NIC sends a whole window in one instant; a userspace endpoint, whose
    encode + send costs 15-20 microseconds per packet, asks for a few dozen at a time so
    a packet's timestamp is within about a millisecond of its real send time:
    io/endpoint.py caps it at 64)."""
    sack_every_bytes: int = 16384
    """The receiver SACKs after this many new bytes (htsim: 16 KB); an endpoint on real
    sockets raises it to four packets (io/endpoint.py ``IO_SACK_PACKETS``)."""
    ack_delay: float = 50e-6
    """Longest the receiver holds back a SACK for received data (ours)."""
    reorder_window: int = 1024
    """PSNs the receiver accepts beyond its cumulative PSN, and the sender's bound on the
    PSNs in flight: OCP's MPR, which mrc.h counts in units of 128 PSNs; its example
    (examples/mrc_qp.md) sets 8, 1024 PSNs."""
    max_message: int = 1 << 31
    """Largest message the receiver allocates a buffer for, bytes (ours)."""
    msn_window: int = 1024
    """Messages the receiver tracks beyond the next one to deliver (ours)."""
    loss_pkt_min: int = 5
    """Packet-threshold loss: max(min(1.5 cwnd, max window), this) packets (htsim)."""
    rack_reo_fraction: float = 1.0
    """Least RACK reordering window, as a fraction of min RTT (RFC 8985 section 6.2 uses
    1/4 for a single path; ours: 1, since spraying reorders by a whole queue)."""
    initial_rtt: float = 1e-3
    """RTT assumed before the first sample (ours; RFC 6298 uses 1 s for the Internet)."""
    first_rto: float = 50e-3
    """Least RTO until a data packet's RTT was sampled (ours): the handshake's small packets
    understate a data packet's RTT (a 9000-byte packet takes 0.72 ms per hop at 100
    Mbit/s, and the first window queues at the sender's own ports), and an RTO from
    them fired on the first window of most connections of an incast in the shaped lab
    (docs/measurements.md, bench/trim.py)."""
    min_rto: float = 1e-3
    """Smallest retransmission timeout. OCP's ACK timeout is 1.024 us x 2^t (mrc.h; t = 8,
    262 us, in examples/mrc_qp.md), htsim's least RTO 100 us; ours 1 ms (about t = 10),
    the scheduling jitter of a userspace stack."""
    max_rto: float = 1.0
    """Largest retransmission timeout after backoff (ours)."""
    rto_linear: int = 7
    """RTOs in a row at the same timeout before it doubles (OCP mrc.h ``retry.linear_cnt``,
    7 in examples/mrc_qp.md)."""
    max_rto_count: int = 19
    """Consecutive RTOs after which the connection is declared failed: the ``rto_linear``
    ones and 12 doubling ones (ours: OCP's example allows 25 exponential retries, which
    mrc.h reads as never giving up)."""
    probe_after_rtts: float = 3.0
    """A retired EV is first probed this many probe RTTs after retirement; a probe RTT is
    max(base RTT, srtt) (ev.py probe_rtt). Ours: no published value (htsim's 3 base RTTs
    are its tail-loss probe's, SLEEK in uec.cpp, not an EV's)."""
    probe_timeout: float = 2e-3
    """An EV probe unanswered this long counts as failed and is retried (OCP
    examples/mrc_ctl_ev_probes.md: 2 ms), or after 2 probe RTTs if that is longer (ours:
    a userspace RTT reaches milliseconds)."""
    reverse_evs: int = 1
    """EVs of each plane in the reverse EV set that acknowledgements go on (paper: a small
    set, at least one per plane; the value ours)."""
    reverse_probe_interval: float = 10e-3
    """While a connection acknowledges data and sends none of its own (idle), one reverse
    EV, at random, is probed this often, or every probe timeout if that is longer; one
    unanswered by the next round is retired (paper: "probes a random EV when idle"; the
    interval ours: a userspace probe costs tens of microseconds at each end, per
    connection; reverse.py)."""
    probe_next_rtts: float = 3.0
    """With ``readmit_probes`` above one, the next probe follows a reply this many probe
    RTTs later (ours)."""
    setup_timeout: float = 10e-3
    """First SETUP / CLOSE retransmission timeout, doubled each time (ours)."""
    setup_retries: int = 8
    """SETUP / CLOSE transmissions before giving up (ours)."""
    drain_rtos: float = 3.0
    """A closed or failed connection stays this many times max(RTO, setup_timeout), so a
    late retransmitted CLOSE is still answered, then leaves the endpoint (RFC 9000 section
    10.2: three PTOs). Each late CLOSE answered restarts it, doubled like the peer's
    backoff (ours)."""
    rcvbuf: int = 8 * 1024 * 1024
    """Completed-but-unread message bytes the receiver holds before its window closes
    (ours)."""
    initial_window: int = 64 * 1024
    """NSCC window before any RTT is known (ours; htsim starts at MaxWnd because it knows
    the network's BDP, which the client learns from the SETUP handshake)."""
    host_delay: float = 0.0
    """Processing delay of the two end hosts that the min RTT misses, seconds: NSCC's BDP
    and target use base RTT + this (ours: 0 for a NIC or the simulator; a userspace
    endpoint handles packets in batches and is scheduled in slices, so its min RTT sample
    is a lucky one and 1.5 x rate x min RTT cannot fill the pipe: io/endpoint.py sets
    1 ms, about the lab's gap between min RTT and RTT at low load; docs/measurements.md)."""
    nscc_target_rtts: float = 0.0
    """NSCC target queueing delay in base RTTs; 0: by ``trimming``, 0.75 with it and 1.0
    without (UEC / htsim)."""
    nscc_gamma: float = 0.8
    """NSCC multiplicative decrease gain (htsim)."""
    nscc_md_floor: float = 0.5
    """Largest multiplicative decrease: the window keeps at least this fraction (htsim)."""
    nscc_fi_mtus: float = 5.0
    """NSCC fair increase in MSS per RTT, times BDP / htsim's reference BDP (htsim fi = 5)."""
    nscc_pi_bdp: float = 0.25
    """"nscc-lab" only: at zero queueing delay its window grows by this fraction of the BDP
    per RTT (ours; UEC's NSCC scales htsim's alpha by BDP and target instead)."""
    nscc_qa_targets: float = 4.0
    """Quick adapt when queueing delay exceeds this many targets (htsim)."""
    nscc_max_bdp: float = 1.5
    """Largest window in BDPs (htsim: 1.5)."""
    nscc_delay_ewma: float = 0.0125
    """Weight of a new sample in the averaged queueing delay used by MD (htsim
    ``_delay_alpha``; "nscc-lab" uses 0.125)."""
