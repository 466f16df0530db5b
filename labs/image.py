"""The recipe of the node image an exported fabric runs (`mrc lab export`): a Dockerfile.

Every node, host or switch, runs the same image: iproute2, nftables and procps for the
node's commands (labs/nodescript.py), and mrc itself, built as `make setup` builds it (the
venv, the C fast path, the compiled core), for `mrc perf` and for the hosts' paths files.
A fabric whose switches run BPF programs (the BPF switch, trimming, RED marking) also
gets clang, libbpf's headers and bpftool, and the programs compiled once into the cache
labs/bpf.py loads them from, so a node never compiles at start.
"""

from __future__ import annotations

from labs.plan import Op, TcBpf

DOCKERFILE = "mrc-node.Dockerfile"
"""The recipe's file name, beside the exported file."""
IMAGE = "mrc-node:latest"
"""The image name an export uses unless told otherwise."""
BASE = "debian:bookworm-slim"
"""Debian, as the project's own setup (Makefile), with Python 3.11."""
PACKAGES = "iproute2 nftables procps make python3 python3-venv python3-dev gcc libc6-dev libffi-dev"
BPF_PACKAGES = "clang libbpf-dev bpftool"
HOME = "/opt/mrc"
CACHE = "/var/lib/mrc"
"""The image's MRC_LAB_STATE_DIR: where labs/bpf.py keeps compiled programs."""
SOURCES = ("csrc", "labs", "mrc_transport", "srv6")
"""The checkout's folders the build needs; named so a checkout's .venv is not copied."""


def programs(ops: list[Op]) -> list[str]:
    """The BPF programs the plan's switches run."""
    return sorted({op.program for op in ops if isinstance(op, TcBpf)})


def dockerfile(ops: list[Op], image: str = IMAGE) -> str:
    """The Dockerfile of ``image`` for a fabric of plan ``ops``; built with a checkout of
    mrc as the context."""
    bpf = programs(ops)
    packages = f"{PACKAGES} {BPF_PACKAGES}" if bpf else PACKAGES
    lines = [
        f"# The node image of an exported mrc fabric ({image}): every host and switch runs it.",
        "# Build it with a checkout of mrc as the context:",
        f"#   docker build -t {image} -f {DOCKERFILE} /path/to/mrc",
        f"FROM {BASE}",
        "RUN apt-get update \\",
        " && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\",
        f"      {packages} \\",
        " && rm -rf /var/lib/apt/lists/*",
        f"WORKDIR {HOME}",
        "COPY pyproject.toml setup.py Makefile README.md LICENSE ./",
        *(f"COPY {folder} {folder}" for folder in SOURCES),
        "# the venv, the C fast path and the compiled protocol core, as `make setup` builds them",
        "RUN make venv fastpath core",
        f"ENV PATH={HOME}/.venv/bin:$PATH MRC_LAB_STATE_DIR={CACHE}",
    ]
    if bpf:
        names = ", ".join(repr(p) for p in bpf)
        lines += [
            "# the switches' BPF programs, compiled once into labs/bpf.py's cache",
            f'RUN python3 -c "from labs.bpf import object_path; '
            f'[object_path(p) for p in ({names},)]"',
        ]
    lines.append('CMD ["sleep", "infinity"]')
    return "\n".join(lines) + "\n"
