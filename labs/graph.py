"""A picture of the fabric for a projector: hosts at the bottom grouped by rack, T0s above
them, T1s on top, one colour per plane with a legend (matplotlib; the file extension picks
PNG or SVG)."""

from __future__ import annotations

from typing import Any

from labs.errors import LabError
from labs.topology import Topology

LABEL_PT = 10
"""Node labels in points: legible from the back of a room at the PNG's full size."""
LABELLED_NODES = 48
"""Above this many nodes (the `large` preset) labels would overlap: only racks are named."""
RACK_GAP = 0.6
"""Empty host slots between racks, so each rack reads as a group."""


def positions(topo: Topology) -> dict[str, tuple[float, float]]:
    """x, y of every node: hosts rack by rack with a gap between racks, planes side by side
    above them, racks spread inside each plane."""
    pos: dict[str, tuple[float, float]] = {}
    slots = len(topo.hosts) + RACK_GAP * (topo.racks - 1)
    for h in topo.hosts:
        slot = topo.hosts.index(h) + RACK_GAP * topo.rack_of(h)
        pos[h] = ((slot + 0.5) / slots, 0.0)
    width = 1.0 / topo.planes
    for p in range(topo.planes):
        left = p * width
        for r in range(topo.racks):
            pos[topo.t0(p, r)] = (left + (r + 0.5) * width / topo.racks, 1.0)
        for j in range(topo.t1_per_plane):
            pos[topo.t1(p, j)] = (left + (j + 0.5) * width / topo.t1_per_plane, 2.0)
    return pos


def draw(topo: Topology, out: str, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pos = positions(topo)
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(min(20.0, max(12.0, len(topo.hosts) * 0.9)), 7), dpi=120)
    for ln in topo.links:
        (xa, ya), (xb, yb) = pos[ln.a], pos[ln.b]
        ax.plot([xa, xb], [ya, yb], color=colours(ln.plane % 10), lw=1.0, alpha=0.55)
    for node, (x, y) in pos.items():
        colour = "black" if topo.kind_of(node) == "host" else colours(topo.plane_of(node) % 10)
        ax.scatter([x], [y], s=110, color=colour, zorder=3)
    if len(topo.nodes) <= LABELLED_NODES:
        _labels(ax, topo, pos)
    _racks(ax, topo, pos)
    for p in range(topo.planes):
        ax.plot([], [], color=colours(p % 10), lw=3, label=f"plane {p}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=topo.planes, fontsize=LABEL_PT)
    ax.set_yticks([0, 1, 2], ["hosts", "T0", "T1"], fontsize=LABEL_PT + 2)
    ax.set_xticks([])
    ax.set_ylim(-0.45, 2.3)
    ax.set_title(title or f"{topo.planes}-plane Clos", fontsize=LABEL_PT + 4)
    fig.tight_layout()
    try:
        fig.savefig(out)
    except OSError as exc:  # a missing directory, no permission: the user's to fix
        raise LabError(f"{out}: {exc.strerror}") from None
    finally:
        plt.close(fig)


def _labels(ax: Any, topo: Topology, pos: dict[str, tuple[float, float]]) -> None:
    """Each node's name: hosts below their dot, switches above (so no label sits on a link's
    end), switches rotated when a tier is crowded."""
    crowded = topo.planes * max(topo.racks, topo.t1_per_plane) > 12
    for node, (x, y) in pos.items():
        host = topo.kind_of(node) == "host"
        ax.annotate(
            node,
            (x, y),
            textcoords="offset points",
            xytext=(0, -16 if host else 9),
            ha="center",
            va="top" if host else "bottom",
            fontsize=LABEL_PT,
            rotation=0 if host or not crowded else 30,
        )


def _racks(ax: Any, topo: Topology, pos: dict[str, tuple[float, float]]) -> None:
    """A shaded band under each rack's hosts, named."""
    half = 0.5 / (len(topo.hosts) + RACK_GAP * (topo.racks - 1))
    for r in range(topo.racks):
        xs = [pos[h][0] for h in topo.hosts_in_rack(r)]
        ax.axvspan(min(xs) - half, max(xs) + half, ymin=0, ymax=0.12, color="0.9", zorder=0)
        ax.text((min(xs) + max(xs)) / 2, -0.4, f"rack {r}", ha="center", fontsize=LABEL_PT + 1)
