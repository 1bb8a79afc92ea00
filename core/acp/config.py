"""An ACP agent's session config options (ACP's ``session/set_config_option``), as the agent
file's ``model = "…"`` uses them.

An agent lists its options in its ``session/new`` answer (``configOptions``): a select whose
``category`` is ``model`` (or whose id is ``model``) is the model. The agent file's model is
chosen through it when it differs from the current one; a model the agent does not offer fails
the run in words, naming the ones it offers. An agent that lists no model option keeps its own
model, and the agent file's ``model`` is then only the name prices are looked up by.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.acp.errors import AcpError

__all__ = ["choose_model"]


def model_option(options: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The agent's model option, if it lists one."""
    for option in options:
        if option.get("category") == "model" and option.get("values") != [True, False]:
            return option
    return next((o for o in options if o.get("id") == "model"), None)


def choose_model(agent: str, model: str, options: Sequence[dict[str, Any]]) -> str | None:
    """The config id to set to ``model``, None when nothing is to be set (no model option, or it
    is the current one); AcpError in words for a model the agent does not offer."""
    option = model_option(options)
    if option is None:
        return None
    chosen = _match(model, option)
    if chosen is None:
        raise AcpError(f"{agent} does not offer the model {model!r} (the agent file's model): its models are "
                       f"{', '.join(str(v) for v in option['values']) or 'none'}")
    return None if option.get("value") == chosen else str(option["id"])


def offered_value(model: str, options: Sequence[dict[str, Any]]) -> str:
    """The value the agent calls ``model`` by (its own, provider prefix included)."""
    option = model_option(options)
    return (_match(model, option) if option else None) or model


def _match(model: str, option: dict[str, Any]) -> str | None:
    """The agent's value for ``model``: the same value, one with a provider's prefix
    (OpenCode's ``tether/scripted`` for ``scripted``), or the value of the same name (Qwen
    Code's ``$runtime|openai|scripted(openai)`` is named ``scripted``)."""
    values = [str(v) for v in option["values"]]
    labels = list(option.get("labels") or ())
    if model in values:
        return model
    prefixed = next((v for v in values if v.endswith("/" + model)), None)
    if prefixed is not None:
        return prefixed
    return next((v for v, label in zip(values, labels) if label == model), None)
