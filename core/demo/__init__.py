"""The demo agent set: the scripted provider and its scenarios, the sample workspace's agents, the lab and the eval. Only the CLI's demo commands import it."""

from tether.demo.agents import scan_archive


def __getattr__(name: str) -> object:
    # Runs name the demo's tool "tether.demo:scan_archive" (a reference saved with each run
    # since before the demo was a package), so the package hands it on, imported when asked.
    if name == "scan_archive":
        return scan_archive
    raise AttributeError(f"module 'tether.demo' has no attribute {name!r}")
