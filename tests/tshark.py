"""Run the real tshark with the shipped MRC dissector, and what it must show for a packet.

``expected_fields`` is the project's decoder's view of a packet and ``scapy_fields`` the
scapy layer's, both under the dissector's field names (mrc_transport/wireshark/mrc.lua),
so a test compares the three packet for packet. Without tshark (or without Lua in it) a
test skips, and under MRC_REQUIRE_LAB=1 (CI) it fails.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import UDP
from scapy.packet import Packet as ScapyPacket

from mrc_transport.protocol.ev import ev_fields
from mrc_transport.wire import Packet, SackHeader
from mrc_transport.wire.frames import SACK_BITMAP_BITS
from mrc_transport.wire.scapy_layer import MRC
from mrc_transport.wireshark import lua_path
from tests.conftest import REQUIRE_LAB_ENV, lab_required

LUA_ERROR = "Lua Error"
# frames.py field name -> dissector field, where the name alone would be ambiguous.
RENAMED = {"ev": "mrc.reflected_ev", "reason": "mrc.nack_reason"}
COMMON_FIELDS = ("mrc.version", "mrc.opcode", "mrc.flags", "mrc.dst_conn", "mrc.src_conn")
BODY_FIELDS = (
    *("mrc.psn", "mrc.msn", "mrc.msg_offset", "mrc.msg_len", "mrc.ts", "mrc.payload_len"),
    *("mrc.cum_psn", "mrc.sack_base", "mrc.bitmap", "mrc.sack.psn", "mrc.reflected_ev"),
    *("mrc.ooo_count", "mrc.rwnd_penalty", "mrc.rwnd", "mrc.nack_reason", "mrc.probe_id"),
    *("mrc.rcvd_bytes", "mrc.service_time", "mrc.ports_down"),
    *("mrc.initial_psn", "mrc.mtu", "mrc.ev_count", "mrc.final_psn"),
)
EV_FIELDS = ("mrc.ev", "mrc.ev.plane", "mrc.ev.path", "mrc.ev.entropy")
ALL_FIELDS = (*COMMON_FIELDS, *EV_FIELDS, *BODY_FIELDS)


def require_tshark() -> str:
    """tshark's version line; skip (fail under MRC_REQUIRE_LAB=1) without a Lua-enabled one."""
    problem = None
    if shutil.which("tshark") is None:
        problem = "tshark is not installed (Debian package tshark; `make setup` installs it)"
    else:
        version = subprocess.run(["tshark", "-v"], capture_output=True, text=True, check=False)
        if "with Lua" not in version.stdout:
            problem = "this tshark has no Lua support"
    if problem is None:
        return version.stdout.splitlines()[0]
    if lab_required():
        pytest.fail(f"{REQUIRE_LAB_ENV}=1 but {problem}")
    pytest.skip(problem)


def tshark(*args: str, lua: bool = True, env: dict[str, str] | None = None) -> str:
    """tshark's stdout; fails the test on an error exit or any Lua error, on either stream."""
    argv = ["tshark", *(["-X", f"lua_script:{lua_path()}"] if lua else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert LUA_ERROR not in done.stdout + done.stderr, done.stdout + done.stderr
    return done.stdout


def fields(pcap: Path, names: tuple[str, ...] = ALL_FIELDS, *extra: str) -> list[dict[str, str]]:
    """One dict per frame: field name -> tshark's text ("" when absent, values joined by
    commas when repeated)."""
    argv = ["-r", str(pcap), "-T", "fields", "-E", "aggregator=,", "-E", "separator=\t"]
    out = tshark(*argv, *extra, *(arg for name in names for arg in ("-e", name)))
    return [dict(zip(names, line.split("\t"), strict=True)) for line in out.splitlines()]


def as_ints(text: str) -> list[int]:
    return [int(v, 0) for v in text.split(",")] if text else []


def sacked_psns(header: SackHeader) -> list[int]:
    """The PSNs a SACK's bitmap acknowledges: bit i is PSN sack_base + i (docs/protocol.md)."""
    bits = range(SACK_BITMAP_BITS)
    return [(header.sack_base + i) % 2**32 for i in bits if header.bitmap >> i & 1]


def expected_fields(packet: Packet) -> dict[str, list[int]]:
    """What the dissector must show for a packet the project's decoder parsed."""
    header = packet.header
    common = header.common
    want = {
        "mrc.version": [1],
        "mrc.opcode": [int(common.opcode)],
        "mrc.flags": [int(common.flags)],
        "mrc.dst_conn": [common.dst_conn],
        "mrc.src_conn": [common.src_conn],
        "mrc.ev": [packet.path.ev],
    }
    # the path the EV's bits name, as the core reads them (protocol/ev.py)
    for name, value in zip(EV_FIELDS[1:], ev_fields(packet.path.ev), strict=True):
        want[name] = [value]
    for field in dataclasses.fields(header):
        if field.name != "common":
            name = RENAMED.get(field.name, f"mrc.{field.name}")
            want[name] = [int(getattr(header, field.name))]
    if isinstance(header, SackHeader):
        want["mrc.sack.psn"] = sacked_psns(header)
    elif "mrc.psn" in want and "mrc.msn" in want:  # a data packet
        want["mrc.payload_len"] = [len(packet.payload)]
    return want


def scapy_fields(frame: ScapyPacket) -> dict[str, list[int]]:
    """The scapy layer's view of the MRC header in a captured frame, by dissector names."""
    mrc = frame[MRC] if MRC in frame else MRC(bytes(frame[UDP].payload))
    want = {f"mrc.{name}": [int(mrc.getfieldval(name))] for name in _names(mrc)}
    want.pop("mrc.reserved")
    body: Any = mrc.payload
    for name in _names(body):
        if name != "reserved":
            want[RENAMED.get(name, f"mrc.{name}")] = [int(body.getfieldval(name))]
    return want


def _names(layer: ScapyPacket) -> list[str]:
    return [f.name for f in layer.fields_desc]


def assert_frame_matches(
    shown: dict[str, str], want: dict[str, list[int]], where: str, *, exact: bool = False
) -> None:
    """Every field ``want`` names shows its value; with ``exact``, no other field does."""
    names = ALL_FIELDS if exact else tuple(want)
    got = {name: as_ints(shown[name]) for name in names}
    assert got == {name: want.get(name, []) for name in names}, where
