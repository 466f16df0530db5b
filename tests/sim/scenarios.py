"""Helpers shared by the simulation tests: one-connection transfers and goodput probes."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mrc_transport.protocol import Config, Connection

from .fabric import Fabric, Host, Link

PATH_RATE = 1e9


@dataclass
class Run:
    """A fabric with a client and a server and one connection between them."""

    fabric: Fabric
    a: Host
    b: Host
    conn: Connection
    samples: list[tuple[float, int]] = field(default_factory=list)

    @property
    def server(self) -> Connection:
        return next(iter(self.b.endpoint.connections.values()))

    def sample_every(self, dt: float) -> None:
        """Record the server's accepted bytes every ``dt`` of virtual time."""

        def tick() -> None:
            conns = self.b.endpoint.connections.values()
            got = sum(c.counters.bytes_received for c in conns)
            self.samples.append((self.fabric.now, got))
            self.fabric.at(self.fabric.now + dt, tick)

        self.fabric.at(self.fabric.now + dt, tick)

    def rate(self, t0: float, t1: float) -> float:
        """Goodput in bit/s between the samples nearest ``t0`` and ``t1``."""
        s0 = min(self.samples, key=lambda s: abs(s[0] - t0))
        s1 = min(self.samples, key=lambda s: abs(s[0] - t1))
        return (s1[1] - s0[1]) * 8 / (s1[0] - s0[0])


def start(
    seed: int, planes: int = 2, paths: int = 4, link: Link | None = None, **cfg: object
) -> Run:
    """Fabric, two hosts, a connection established and warm (1 ms)."""
    spec = link or Link(rate_bps=PATH_RATE)
    fabric = Fabric(
        seed,
        planes,
        paths,
        link=lambda: Link(
            **{k: v for k, v in vars(spec).items() if k in Link.__dataclass_fields__}
        ),
    )
    config = Config(nic_rate_bps=PATH_RATE * planes * paths, **cfg)  # type: ignore[arg-type]
    a, b = fabric.add_host("a", config), fabric.add_host("b", config)
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(1e-3)
    return Run(fabric, a, b, conn)


def blob(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def jain(xs: list[float]) -> float:
    """Jain's fairness index: 1 when every share is equal."""
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))
