"""A picture of the fabric: hosts at the bottom, T0s above them, T1s on top, one colour per
plane (matplotlib; the file extension picks PNG or SVG)."""

from __future__ import annotations

from labs.errors import LabError
from labs.topology import Topology


def positions(topo: Topology) -> dict[str, tuple[float, float]]:
    """x, y of every node: planes side by side, racks spread inside each plane."""
    pos: dict[str, tuple[float, float]] = {}
    n_hosts = len(topo.hosts)
    for i, h in enumerate(topo.hosts):
        pos[h] = ((i + 0.5) / n_hosts, 0.0)
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
    fig, ax = plt.subplots(figsize=(max(8.0, len(topo.hosts) * 0.5), 5))
    for ln in topo.links:
        (xa, ya), (xb, yb) = pos[ln.a], pos[ln.b]
        ax.plot([xa, xb], [ya, yb], color=colours(ln.plane % 10), lw=0.6, alpha=0.6)
    small = len(topo.nodes) <= 48
    for node, (x, y) in pos.items():
        colour = "black" if node.startswith("h") else colours(topo.plane_of(node) % 10)
        ax.scatter([x], [y], s=60, color=colour, zorder=3)
        if small:
            ax.annotate(
                node, (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=6
            )
    ax.set_yticks([0, 1, 2], ["hosts", "T0", "T1"])
    ax.set_xticks([])
    ax.set_title(title or f"{topo.planes}-plane Clos")
    fig.tight_layout()
    try:
        fig.savefig(out)
    except OSError as exc:  # a missing directory, no permission: the user's to fix
        raise LabError(f"{out}: {exc.strerror}") from None
    finally:
        plt.close(fig)
