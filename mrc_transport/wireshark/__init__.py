"""The Wireshark dissector for MRC, shipped with the package: where it is, where it goes.

``mrc.lua`` (this folder) decodes every opcode and field of docs/protocol.md; tshark loads
it with ``-X lua_script:<lua_path()>``, Wireshark from its personal Lua plugin folder,
``$HOME/.local/lib/wireshark/plugins`` on Linux and macOS since Wireshark 2.5 (the User's
Guide, "Plugin folders"; `tshark -G folders` prints it as "Personal Lua Plugins", and it
follows HOME, not XDG_CONFIG_HOME).
"""

from __future__ import annotations

import shutil
from pathlib import Path

LUA_NAME = "mrc.lua"


def lua_path() -> Path:
    """The dissector as installed with the package."""
    return Path(__file__).with_name(LUA_NAME)


def personal_plugin_dir(home: Path | None = None) -> Path:
    """Wireshark's personal Lua plugin folder for the user whose home is ``home``."""
    return (home or Path.home()) / ".local" / "lib" / "wireshark" / "plugins"


def install(folder: Path | None = None) -> Path:
    """Copy the dissector into ``folder`` (default: the personal plugin folder), creating
    it; the installed file's path. OSError if it cannot be written."""
    folder = folder or personal_plugin_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(lua_path(), folder / LUA_NAME))
