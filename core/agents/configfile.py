"""Which agent file is in force, and the error a bad one raises.

Apart from :mod:`tether.agents.config`, whose checker is built on pydantic: a command run with
no agent file (the demo agents, or an endpoint and a model) never needs the checker, so
it starts without importing it. :mod:`tether.agents.config` re-exports these names.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

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


def read_toml(path: Path) -> dict[str, Any]:
    """The agent file ``path`` as TOML, or a :class:`ConfigError` naming the file and the fix
    (the agent file's checker and the notification tables read it the same way)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file: create it, or point --config / ${CONFIG_ENV} elsewhere") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deep") from None
