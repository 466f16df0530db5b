"""The lab's tc-BPF programs: C sources in labs/bpf/, compiled with clang on first use,
loaded once per lab and pinned, then attached to any number of ports by their pin.

An object is cached under the lab state directory by a hash of its source and of the
compiler's command line, so an edited source is rebuilt and a stale object is never loaded;
a read-only install still works. Loading once per lab matters: the verifier runs per load,
and the default lab attaches the switch program to 96 ports. Pins live in a bpf
filesystem of the labs' own at /run/mrc-bpf/<lab>/, which `down` removes; not under
/sys/fs/bpf, which `tc -n` and `ip netns exec` do not see (they mount a fresh /sys).
``clang``, libbpf's headers and ``bpftool`` are Debian packages that `make` installs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from labs.errors import LabError
from labs.state import state_dir

SOURCE_DIR = Path(__file__).with_name("bpf")
BPFFS = Path("/run/mrc-bpf")
PIN_ROOT = BPFFS
CFLAGS = ("-O2", "-g", "-Wall", "-Werror", "-target", "bpf")


def _include_flags() -> list[str]:
    """Debian keeps asm/ under the multiarch include directory, which clang -target bpf
    does not search by itself."""
    machine = subprocess.run(
        ["gcc", "-print-multiarch"], capture_output=True, text=True, check=False
    ).stdout.strip()
    arch_dir = Path("/usr/include") / machine
    return [f"-I{arch_dir}"] if machine and arch_dir.is_dir() else []


def object_path(program: str) -> Path:
    """The compiled object of ``labs/bpf/<program>.c``, built now if it is not cached.
    LabError (one line) if the source, clang or the headers are missing."""
    source = SOURCE_DIR / f"{program}.c"
    if not source.is_file():
        raise LabError(f"no BPF program {program!r} ({source} is missing)")
    argv = ["clang", *CFLAGS, *_include_flags(), "-c", str(source)]
    digest = hashlib.sha256(source.read_bytes() + " ".join(argv).encode()).hexdigest()[:16]
    target = state_dir() / "bpf" / f"{program}-{digest}.o"
    if target.is_file():
        return target
    if shutil.which("clang") is None:
        raise LabError("the lab's BPF programs need clang (apt-get install clang libbpf-dev)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    res = subprocess.run([*argv, "-o", str(tmp)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr.strip())
        raise LabError(f"clang could not build {source.name}: {first}")
    tmp.replace(target)  # atomic: a concurrent `lab up` sees the whole object or none
    return target


def _run(argv: list[str], what: str) -> None:
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if ln.strip()), "failed")
        raise LabError(f"{what}: {first.strip()}")


def _mounted(path: Path) -> bool:
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == str(path) for line in f)


def pin_dir(lab: str) -> Path:
    return PIN_ROOT / lab


def maps_dir(lab: str, program: str) -> Path:
    """Where the maps of ``program`` are pinned for ``lab``: one file per map, by name."""
    return pin_dir(lab) / f"{program}_maps"  # bpffs refuses "." in a name


def pinned(lab: str, program: str) -> Path:
    """The pin of ``program`` loaded for ``lab``; compiled and loaded now if not yet."""
    pin = pin_dir(lab) / program
    if pin.exists():
        return pin
    obj = object_path(program)
    if shutil.which("bpftool") is None:
        raise LabError("the lab's BPF programs need bpftool (apt-get install bpftool)")
    if not _mounted(BPFFS):
        BPFFS.mkdir(parents=True, exist_ok=True)
        _run(["mount", "-t", "bpf", "bpf", str(BPFFS)], f"mount the bpf filesystem at {BPFFS}")
    pin.parent.mkdir(parents=True, exist_ok=True)
    _run(
        ["bpftool", "prog", "load", str(obj), str(pin), "type", "classifier",
         "pinmaps", str(maps_dir(lab, program))],
        f"load {obj.name}",
    )  # fmt: skip
    return pin


def dump_map(pin: Path) -> list[dict[str, Any]]:
    """Every entry of a pinned map as bpftool shows it with the object's BTF: a dict of
    ``{"key": ..., "value": ...}`` with the C struct's field names."""
    res = subprocess.run(
        ["bpftool", "-j", "map", "dump", "pinned", str(pin)],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if ln.strip()), "failed")
        raise LabError(f"bpftool map dump {pin}: {first.strip()}")
    return [entry["formatted"] for entry in json.loads(res.stdout)]


def unpin(lab: str) -> None:
    """Remove the lab's pins; a program stays loaded only while a port still uses it."""
    folder = pin_dir(lab)
    if not folder.is_dir():
        return
    for pin in folder.iterdir():
        if pin.is_dir():  # a program's maps (maps_dir)
            for map_pin in pin.iterdir():
                map_pin.unlink()
            os.rmdir(pin)
        else:
            pin.unlink()
    os.rmdir(folder)
