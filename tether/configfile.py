"""Which agent file is in force, and the error a bad one raises.

Apart from :mod:`tether.config`, whose checker is built on pydantic: a command run with
no agent file (the demo agents, or an endpoint and a model) never needs the checker, so
it starts without importing it. :mod:`tether.config` re-exports these names.
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_FILE = "tether.toml"
CONFIG_ENV = "TETHER_CONFIG"


class ConfigError(ValueError):
    """A problem with an agent file, in one line: the file, the key, and the fix."""


def find_config(explicit: Path | str | None = None) -> Path | None:
    """The agent file in force: ``explicit``, ``$TETHER_CONFIG``, or ``./tether.toml``."""
    if explicit:
        return Path(explicit)
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    here = Path.cwd() / CONFIG_FILE
    return here if here.is_file() else None
