"""The port program's map (labs/bpf/mrc_port.c): the entry `lab up` writes for every switch
port that trims or marks RED, and the counters `mrc lab status --json` reads back.

The entry is written with ``bpftool batch`` (one process for every port of the lab) and
read with ``bpftool -j map dump``, which names the fields from the object's BTF: the
counters are read by name, so only the writer depends on the layout below.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from labs import bpf
from labs.errors import LabError
from labs.plan import HTB_HIGH, HTB_LOW, PORT_PROGRAM, PortMap, build
from labs.topology import Topology
from mrc_transport.wire.frames import (
    DATA_HEADER_LEN,
    DATA_OPCODES,
    DSCP_NO_TRIM,
    DSCP_RTX,
    DSCP_TRIMMED,
    DSCP_TRIMMED_LASTHOP,
    MRC_UDP_PORT,
    MRC_VERSION,
    TRIMMABLE_DSCPS,
    UDP_HEADER_LEN,
)

MAP = "ports"
PORT_TRIM, PORT_MARK, PORT_FACES_HOST = 0x1, 0x2, 0x4
STUB_L4 = UDP_HEADER_LEN + DATA_HEADER_LEN
"""What a stub keeps after the IPv6 header and SRH: UDP, the MRC common and data headers."""
COUNTERS: tuple[str, ...] = (
    *("passed", "passed_bytes", "trimmed", "trimmed_bytes", "dropped", "dropped_bytes"),
    *("marked", "trim_errors", "q_max", "trimmed_rtx", "dropped_no_trim"),
)

# struct port in labs/bpf/mrc_port.c, native byte order, no implicit padding: lock, flags,
# rate; trim_at, limit, mark_min, mark_max, mark_p, burst; udp_port, keep, opcodes;
# version, rtx_dscp, trim_dscp, 1 pad, udp_ports, 4 pad; prio_hi, prio_lo; prio_dscps,
# trim_dscps, no_trim_dscps; then 4 state words and 10 counters, written as zero.
_STATE_AND_COUNTERS = 14
_PORT = struct.Struct(f"=IIQ6I3H3BxH4xIIQQQ{_STATE_AND_COUNTERS}Q")
MRC_PORTS = 256
"""UDP ports 4791 and the 255 above it are MRC's: a host runs one `mrc perf` server per
port (one per incoming flow in the demos and repro), where a NIC has one port for all."""
_KEY = struct.Struct("=6s2x")


def port_value(op: PortMap) -> bytes:
    """The map value of one port: configuration, an empty queue, zero counters."""
    flags = (PORT_TRIM if op.trim_at else 0) | (PORT_MARK if op.mark_max else 0)
    flags |= PORT_FACES_HOST if op.faces_host else 0
    opcodes = sum(1 << int(code) for code in DATA_OPCODES)
    high = _bits({DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP})
    trim_dscp = DSCP_TRIMMED_LASTHOP if op.faces_host else DSCP_TRIMMED
    mark_p = min(round(op.mark_p * 2**32), 2**32 - 1)
    prio = (HTB_HIGH, HTB_LOW) if op.trim_at else (0, 0)  # htb only on a trimming port
    return _PORT.pack(
        0, flags, op.rate_bps // 8,
        op.trim_at, op.limit, op.mark_min, op.mark_max, mark_p, op.burst,
        MRC_UDP_PORT, STUB_L4, opcodes,
        MRC_VERSION, DSCP_RTX, trim_dscp, MRC_PORTS,
        *prio, high, _bits(TRIMMABLE_DSCPS), _bits({DSCP_NO_TRIM}),
        *([0] * _STATE_AND_COUNTERS),
    )  # fmt: skip


def _bits(dscps: Iterable[int]) -> int:
    """A set of DSCPs as the program's 64-bit mask: bit d for DSCP d."""
    return sum(1 << d for d in set(dscps))


def port_key(mac: str) -> bytes:
    return _KEY.pack(bytes.fromhex(mac.replace(":", "")))


def _hex(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data)


def map_pin(lab: str) -> Path:
    return bpf.maps_dir(lab, PORT_PROGRAM) / MAP


def update_lines(lab: str, ops: Sequence[PortMap]) -> list[str]:
    """``bpftool batch`` lines writing every entry (labs/apply.py map_job runs them)."""
    pin = map_pin(lab)
    return [
        f"map update pinned {pin} key hex {_hex(port_key(op.mac))} value hex {_hex(port_value(op))}"
        for op in ops
    ]


def port_counters(lab: str, topo: Topology) -> list[dict[str, Any]]:
    """Per programmed port: node, dev, whether it trims / marks / faces a host, and the
    program's counters (packets and bytes passed, trimmed, dropped; CE marks; the deepest
    virtual queue; of the trimmed, retransmissions; of the dropped, no-trim packets above
    the trim threshold). Empty for a lab whose switches run no port program."""
    entries = [op for op in build(topo) if isinstance(op, PortMap)]
    if not entries:
        return []
    by_mac = {port_key(op.mac): op for op in entries}
    out: list[dict[str, Any]] = []
    for entry in bpf.dump_map(map_pin(lab)):
        op = by_mac.get(port_key(":".join(f"{b:02x}" for b in entry["key"]["mac"])))
        if op is None:
            continue
        value = entry["value"]
        if missing := [name for name in COUNTERS if name not in value]:
            raise LabError(
                f"lab {lab!r} runs an older port program (no {missing[0]} counter): "
                f"recreate it with `mrc lab down --name {lab}` and `mrc lab up`"
            )
        out.append(
            {
                "node": op.node,
                "dev": op.dev,
                "trim": bool(op.trim_at),
                "mark": bool(op.mark_max),
                "faces_host": op.faces_host,
            }
            | {name: int(value[name]) for name in COUNTERS}
        )
    return sorted(out, key=lambda port: (port["node"], port["dev"]))
