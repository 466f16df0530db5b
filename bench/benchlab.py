"""What the lab benchmarks share: root or one line and exit 2, and a lab of their own,
always taken down."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from labs.apply import down, up
from labs.topology import Topology


def need_root(script: str) -> bool:
    """True as root; otherwise says so in one line (the caller exits 2)."""
    if os.geteuid() == 0:
        return True
    print(f"{script}: needs root (it builds a lab)", file=sys.stderr)
    return False


@contextmanager
def own_lab(topo: Topology, prefix: str) -> Iterator[str]:
    """``topo`` up under a unique name starting with ``prefix``; down whatever happens."""
    name = prefix + uuid.uuid4().hex[:6]
    try:
        up(topo, name)
        yield name
    finally:
        down(name)
