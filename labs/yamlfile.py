"""Read a YAML file a user wrote, turning every failure into one line of error."""

from __future__ import annotations

from pathlib import Path


def read_yaml(path: str | Path, error: type[Exception]) -> object:
    """The parsed document; ``error("<path>: <why>")`` if it cannot be read or parsed."""
    import yaml  # local: keeps `mrc --help` fast

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise error(f"{path}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}:" if mark is not None else ""
        raise error(f"{path}:{line} invalid YAML") from None


def dump_yaml(doc: object, flow_leaves: bool = False) -> str:
    """YAML a person reads: keys in the order given, multi-line strings (scripts, an
    embedded topology) as literal blocks instead of one escaped line; with
    ``flow_leaves``, a list or mapping that holds no other on one line (``[a, b]``)."""
    import yaml

    class Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
        """libyaml's emitter where PyYAML has it: 10x faster on a large export."""

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    flow = None if flow_leaves else False
    out: str = yaml.dump(
        doc, Dumper=Dumper, sort_keys=False, width=1000, allow_unicode=True, default_flow_style=flow
    )
    return out
