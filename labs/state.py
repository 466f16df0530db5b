"""A lab's state file: written BEFORE anything is created, so `down` finds everything the lab
made even after a SIGKILL in the middle of `up`; and the path of its JSONL event log."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.errors import LabError
from labs.topology import Topology, from_dict, namespace

STATE_DIR_ENV = "MRC_LAB_STATE_DIR"
DEFAULT_STATE_DIR = "/run/mrc-labs"


@dataclass(frozen=True, slots=True)
class LabState:
    """What a lab owns."""

    lab: str
    """Lab name."""
    topology: Topology
    """The fabric it was built from."""
    namespaces: tuple[str, ...]
    """Every namespace `up` creates (all tagged mrc-<lab>-); `down` deletes exactly these."""
    complete: bool
    """True once `up` finished; False while building or after a crash mid-way."""
    pid: int
    """Process that ran `up`."""
    t_wall: float
    """time.time() when `up` started."""

    def to_json(self) -> str:
        raw: dict[str, Any] = {
            "lab": self.lab,
            "topology": self.topology.to_dict(),
            "namespaces": list(self.namespaces),
            "complete": self.complete,
            "pid": self.pid,
            "t_wall": self.t_wall,
        }
        return json.dumps(raw, indent=1)


def state_dir() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV, DEFAULT_STATE_DIR))


def state_path(lab: str) -> Path:
    return state_dir() / f"{lab}.json"


def events_path(lab: str) -> Path:
    return state_dir() / f"{lab}.events.jsonl"


def new_state(lab: str, topo: Topology, t_wall: float) -> LabState:
    namespaces = tuple(namespace(lab, n) for n in topo.nodes)
    return LabState(lab, topo, namespaces, False, os.getpid(), t_wall)


def save_state(state: LabState) -> None:
    """Atomic write (rename) and fsync, so a crash never leaves half a file."""
    path = state_path(state.lab)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(state.to_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_state(lab: str) -> LabState:
    path = state_path(lab)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise LabError(f"no lab {lab!r} (no {path}); `mrc lab list` shows the labs") from None
    except (OSError, ValueError) as exc:
        raise LabError(f"{path}: unreadable state file ({exc})") from None
    try:
        return LabState(
            lab=raw["lab"],
            topology=from_dict(raw["topology"], where=str(path)),
            namespaces=tuple(raw["namespaces"]),
            complete=bool(raw["complete"]),
            pid=int(raw["pid"]),
            t_wall=float(raw["t_wall"]),
        )
    except (KeyError, TypeError, ValueError) as exc:  # valid JSON, wrong shape
        raise LabError(f"{path}: unreadable state file (bad field {exc})") from None


def list_labs() -> list[str]:
    d = state_dir()
    if not d.is_dir():
        return []
    return sorted(p.name[: -len(".json")] for p in d.glob("*.json"))


def forget(lab: str) -> None:
    for path in (state_path(lab), events_path(lab)):
        path.unlink(missing_ok=True)
