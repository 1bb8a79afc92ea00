"""The scripted provider: a chat-completions endpoint whose replies are scripted.

See ``scenarios`` for the scripts, ``faults`` for fault injection (its only state),
``app`` for the wire format, and ``server`` for running it over HTTP.
"""

from core.provider.app import create_app
from core.provider.faults import FaultPlan
from core.provider.scenarios import SCENARIOS

__all__ = ["SCENARIOS", "FaultPlan", "create_app"]
