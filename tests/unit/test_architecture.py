"""The layers of docs/architecture.md, checked on every module: each imports (of ours) only
what its layer may, function-level imports included, so a wrong import fails here instead
of creeping in."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ("srv6", "labs", "mrc_transport")

LOW = (
    "srv6",
    "mrc_transport.__version__",
    "mrc_transport.backend",
    "mrc_transport.frozen",
    "mrc_transport._fastpath",
)
WIRE = (*LOW, "mrc_transport.wire")
PROTOCOL = (*WIRE, "mrc_transport.protocol")
LABS = ("srv6", "labs", "mrc_transport.wire.frames")
IO = (*PROTOCOL, "mrc_transport.io", "mrc_transport.jsonl", "labs")
PERF = (*IO, "mrc_transport.perf")
HARNESS = (*PERF, "mrc_transport.harness")
COLLECTIVE = (*HARNESS, "mrc_transport.collective")

ALLOWED: dict[str, tuple[str, ...]] = {
    "srv6": ("srv6",),
    "mrc_transport.wire": WIRE,
    "mrc_transport.protocol": PROTOCOL,
    "labs": LABS,
    "mrc_transport.io": IO,
    "mrc_transport.perf": PERF,
    "mrc_transport.harness": HARNESS,
    "mrc_transport.collective": COLLECTIVE,
    "mrc_transport.demo": (*HARNESS, "mrc_transport.demo"),
    "mrc_transport.repro": (*COLLECTIVE, "mrc_transport.repro"),
}
"""Layer (a package) -> the packages and modules of ours it may import."""


def _module(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path = ROOT) -> set[str]:
    """Every module of ours that ``path`` imports, relative imports resolved."""
    here = _module(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in OURS}


def _layer(module: str) -> str | None:
    return next((lay for lay in ALLOWED if module == lay or module.startswith(lay + ".")), None)


def _allowed(target: str, allowed: tuple[str, ...]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed)


def _violations(root: Path = ROOT) -> list[str]:
    out = []
    for top in OURS:
        for path in sorted((root / top).rglob("*.py")):
            layer = _layer(_module(path, root))
            if layer is None:
                continue
            bad = sorted(t for t in _imports(path, root) if not _allowed(t, ALLOWED[layer]))
            out += [f"{path.relative_to(root)} imports {t}" for t in bad]
    return out


def test_every_module_imports_only_what_its_layer_may() -> None:
    assert _violations() == []


def test_the_check_sees_a_wrong_import(tmp_path: Path) -> None:
    """The protocol core importing the IO layer (inside a function, too) is caught."""
    fake = tmp_path / "mrc_transport" / "protocol" / "bad.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def f() -> None:\n    from ..io import endpoint\n")
    assert _violations(tmp_path) == [
        "mrc_transport/protocol/bad.py imports mrc_transport.io.endpoint"
    ]
