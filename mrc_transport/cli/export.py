"""`mrc lab export`: a fabric for containerlab or clabernetes, and what it shares with `mrc
paths export` (cli/paths.py): where the fabric comes from, and writing files. Parsing,
checking and writing only; the documents come from labs/export.py.

Every document is generated, and every input checked, before the first file is written:
bad input writes nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from mrc_transport.cli.main import UsageError

if TYPE_CHECKING:
    from labs.topology import Topology

Add = Callable[..., argparse.ArgumentParser]


def add_source(p: argparse.ArgumentParser, lab: bool) -> None:
    """--preset / --topology (and --lab): where the fabric comes from."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", help="a preset fabric: tiny, default, large, NAME-trim")
    src.add_argument("--topology", metavar="FILE", help="YAML topology file")
    if lab:
        src.add_argument("--lab", metavar="LAB", help="a running lab's fabric (its state file)")


def fabric(args: argparse.Namespace, lab: str | None) -> Topology:
    """The topology the flags name; with none of them, lab ``lab``'s (if given)."""
    from labs.state import load_state
    from labs.topology import load_yaml, preset

    if args.preset:
        return preset(args.preset)
    if args.topology:
        return load_yaml(args.topology)
    if lab is None:
        raise UsageError("give --preset NAME, --topology FILE or --lab LAB")
    return load_state(lab).topology


def register_lab_export(add: Add) -> None:
    """`mrc lab export`, a subcommand of `mrc lab` (its ``add``)."""
    p = add(
        "export",
        lab_export,
        "write the fabric as a containerlab topology or a clabernetes Topology resource, "
        "with the node image's Dockerfile beside it",
    )
    p.add_argument("--format", required=True, help="containerlab or clabernetes")
    add_source(p, lab=False)
    p.add_argument("-o", dest="out", required=True, metavar="PATH", help="the file to write")
    p.add_argument(
        "--mtu", type=int, help="plan every link for this MTU (clabernetes: 1400 unless given)"
    )
    p.add_argument("--image", default=None, help="the node image (default mrc-node:latest)")
    p.add_argument(
        "--srv6",
        choices=("seg6local", "bpf"),
        help="how the switches run SRv6 (default: the topology's; auto exports seg6local)",
    )


def lab_export(args: argparse.Namespace) -> int:
    """The export, written only once all of it is generated (ExportError: nothing)."""
    from labs import image
    from labs.export import export, link_mtus

    out = Path(args.out)
    if out.name == image.DOCKERFILE:
        raise UsageError(f"-o {out}: that is the name of the image's recipe, written beside it")
    topo = fabric(args, args.name)
    if args.srv6:
        topo = replace(topo, srv6=args.srv6)
    done = export(topo, args.format, args.name, args.image or image.IMAGE, args.mtu)
    recipe = out.parent / image.DOCKERFILE
    write_all({recipe: done.dockerfile, out: done.text})
    t = done.topo
    print(
        f"wrote {out}: {args.format}, {len(t.nodes)} nodes, {len(t.links)} links, "
        f"link MTU {link_mtus(t)}, SRv6 by {t.srv6}"
    )
    print(f"wrote {recipe}: the node image's recipe (see its first lines)")
    print(mss_hint(min(t.host_link.mtu, t.fabric_link.mtu)))
    if t.srv6 == "seg6local" and not kernel_has_seg6local():
        print(
            "this kernel has no seg6local routes: containers on this machine need --srv6 bpf",
            file=sys.stderr,
        )
    return 0


def kernel_has_seg6local() -> bool:
    """Whether this machine's kernel has seg6local, asked only as root (the probe makes a
    namespace); True when it cannot be asked."""
    from labs import kernel

    return os.geteuid() != 0 or kernel.has_seg6local()


def mss_hint(mtu: int) -> str:
    """What `mrc perf --mss` fits these links: without it a node's perf takes the smallest
    MTU of all its interfaces, containerlab's eth0 (often 1500) included."""
    from mrc_transport.io.endpoint import default_mss

    usid, srh = (default_mss(enc, {"link": mtu}) for enc in ("usid", "srh"))
    return f"mrc perf in a node: --mss {usid} (uSID) or {srh} (SRH) fills these links"


def write_all(files: dict[Path, str]) -> None:
    """Write every file, each whole or not at all (a temporary file renamed); the folders
    are checked first, so a bad -o writes nothing."""
    for path in files:
        folder = path.parent
        if not folder.is_dir():
            raise UsageError(f"{path}: no folder {folder}")
        if not os.access(folder, os.W_OK):
            raise UsageError(f"{path}: cannot write in {folder}")
        if path.is_dir():
            raise UsageError(f"{path} is a folder")
    for path, text in files.items():
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
