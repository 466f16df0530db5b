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
