"""The scripted provider: a chat-completions endpoint whose replies are scripted.

See ``scenarios`` for the scripts, ``faults`` for fault injection (its only state),
``app`` for the wire format, and ``server`` for running it over HTTP.
"""

from tether.demo.provider.app import create_app
from tether.demo.provider.faults import FaultPlan
from tether.demo.provider.scenarios import SCENARIOS

__all__ = ["SCENARIOS", "FaultPlan", "create_app"]
