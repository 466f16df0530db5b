"""What one `mrc perf` run is asked to do: the flags, parsed and checked by cli/perf.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from labs.units import Rate, Size

if TYPE_CHECKING:
    from mrc_transport.io.endpoint import Encoding
    from mrc_transport.io.tuning import Moderation

OutputMode = Literal["text", "json", "stream"]
"""Text lines, one -J document, or --json-stream's one event per line."""
DEFAULT_PORT = 4791  # RoCEv2's, as MRC's (mrc-protocol-notes.md)
DEFAULT_SECONDS = 10.0  # iperf3's -t


class OptionsError(Exception):
    """Options this run cannot use (no path to the host, a bad paths file, no such lab
    host): one line, which the CLI prints as a usage error (exit code 2)."""


@dataclass(frozen=True, slots=True)
class PerfOptions:
    """One run's flags. A server uses the endpoint's and the output's; a client all but
    ``one_off``."""

    host: str | None = None
    """-c: the server, a lab host name or an address the paths know; None on a server."""
    port: int = DEFAULT_PORT
    """-p: UDP port of both ends."""
    duration: float | None = None
    """-t: seconds to send; None: ``DEFAULT_SECONDS`` unless -n gives bytes."""
    nbytes: Size = 0
    """-n: bytes to send over all connections; 0: by time."""
    interval: float = 1.0
    """-i: seconds between interval lines; 0: none."""
    parallel: int = 1
    """-P: connections."""
    reverse: bool = False
    """-R: the server sends."""
    rate_bps: Rate = 0
    """-b: target rate per connection, bits per second; 0: as fast as it goes."""
    length: Size = 128 * 1024
    """-l: message size, bytes."""
    output: OutputMode = "text"
    """-J, --json-stream, or text."""
    logfile: str | None = None
    """--logfile: append the output here instead of stdout."""
    evs: int = 128
    """--evs: active EVs per connection."""
    planes: tuple[int, ...] = ()
    """--planes: the planes the sender uses, sorted; empty: all."""
    encoding: Encoding = "usid"
    """--encoding: uSID destination, SRH, or encap (uSIDs on an outer header, an inner
    header between the NICs)."""
    cc: str = "nscc"
    """--cc: congestion control (protocol/cc)."""
    cc_scope: str = "connection"
    """--cc-scope: one window per connection (UEC/MRC) or a window per plane (ours)."""
    scheduler: str = "random"
    """--scheduler: spraying scheduler (protocol/scheduler.py)."""
    reverse_evs: int = 1
    """--reverse-evs: EVs a plane in the receiver's reverse EV set (protocol/reverse.py)."""
    recovery: str = "sack"
    """--recovery: MRC's selective recovery, or "go-back-n" (RoCE's RC, emulated)."""
    no_trim: bool = False
    """--no-trim: data in the class a trimming switch drops rather than trims."""
    moderation: Moderation = "bulk"
    """--moderation: when the receive loop batches its wake-ups (io/tuning.py)."""
    mss: int | None = None
    """--mss: data bytes per packet; None: what the smallest MTU here allows."""
    lab: str | None = None
    """--lab: the lab whose paths to use; None: the lab this host runs in."""
    paths_file: str | None = None
    """--paths-file: YAML file of SRv6 paths (no lab)."""
    path_specs: tuple[str, ...] = ()
    """--path: SRv6 paths to the host, as written on the command line."""
    records: str | None = None
    """--records: the receiver writes a delivery record per message here."""
    flow: str = "mrc"
    """--flow: the flow name in the records."""
    events: str | None = None
    """--events: recovery events as JSON lines, written at exit."""
    seed: int | None = None
    """--seed: of the endpoint's random numbers."""
    one_off: bool = False
    """-1: a server ends after one test."""

    @property
    def seconds(self) -> float:
        """Seconds to send: -t, else 0 with -n (by bytes), else iperf3's 10."""
        if self.duration is not None:
            return self.duration
        return 0.0 if self.nbytes else DEFAULT_SECONDS

    def share(self, i: int) -> int:
        """Connection i's part of -n (the first ones take the remainder)."""
        return self.nbytes // self.parallel + (i < self.nbytes % self.parallel)
