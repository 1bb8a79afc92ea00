"""What each kind of channel is sent: a webhook's event object, ntfy's JSON publish, a
Slack incoming webhook's message. One function per kind, each a pure function of the
channel, the notice and its links, so the formats are tested without a network."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tether.notify.channels import NotifyChannel
from tether.notify.notices import Notice

_TAGS = {"approval": ["raising_hand"], "budget": ["moneybag"], "failed": ["x"], "orphaned": ["warning"],
         "completed": ["white_check_mark"]}
_PRIORITY = {"approval": 4, "orphaned": 4, "failed": 4, "budget": 3, "completed": 3}


@dataclass(frozen=True, slots=True)
class Request:
    """One POST: where, its JSON body, its headers."""

    url: str
    body: dict[str, Any]
    headers: dict[str, str]


def notice_id(channel: NotifyChannel, notice: Notice) -> str:
    """The notification's stable id (the same on a resend): a receiver may drop repeats by it."""
    return hashlib.sha256(f"{channel.name}\0{notice.key}".encode()).hexdigest()[:32]


def request(channel: NotifyChannel, notice: Notice, links: dict[str, str]) -> Request:
    """What to send ``channel`` for ``notice``; ``links`` holds ``approve`` and ``reject``
    URLs for an approval when the sender has a public URL (else it is empty)."""
    build = {"webhook": webhook, "ntfy": ntfy, "slack": slack}[channel.kind]
    headers = {**channel.headers}
    if channel.kind == "webhook":
        headers.setdefault("Idempotency-Key", notice_id(channel, notice))
    return Request(channel.url, build(channel, notice, links), headers)


def webhook(channel: NotifyChannel, notice: Notice, links: dict[str, str]) -> dict[str, Any]:
    """The event object (docs/notifications.md): the notice's fields, its links, its id and time."""
    body: dict[str, Any] = {
        "id": notice_id(channel, notice),
        "channel": channel.name,
        "event": notice.event,
        "title": notice.title,
        "text": notice.words,
        "run_id": notice.run_id,
        "agent": notice.agent,
        "task": notice.task,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(notice.ts)),
        "ts": notice.ts,
        "links": dict(links),
    }
    if notice.event == "approval":
        body.update(tool=notice.tool, call_id=notice.call_id, args=notice.args, args_hash=notice.args_hash,
                    escalated=notice.escalated, why=notice.reason)
    elif notice.event == "budget":
        body.update(level=notice.level, cost_usd=notice.cost_usd, budget_usd=notice.budget_usd)
    elif notice.event in ("failed", "completed"):
        body.update(status=notice.status, reason=notice.reason, cost_usd=notice.cost_usd)
    return body


def ntfy(channel: NotifyChannel, notice: Notice, links: dict[str, str]) -> dict[str, Any]:
    """ntfy's JSON publishing (POST to the server's root, the topic in the body), with
    buttons: Approve as an ``http`` POST to its link when the channel's links decide
    without a login (``bearer``), else a ``view`` of the link's page; Reject is always a
    view, the page asks for the reason."""
    body: dict[str, Any] = {
        "topic": channel.topic,
        "title": notice.title,
        "message": notice.words,
        "priority": channel.priority or _PRIORITY.get(notice.event, 3),
        "tags": list(_TAGS.get(notice.event, [])),
    }
    actions: list[dict[str, Any]] = []
    if "approve" in links:
        if channel.bearer:
            actions.append({"action": "http", "label": "Approve", "url": links["approve"], "method": "POST",
                            "clear": True})
        else:
            actions.append({"action": "view", "label": "Approve", "url": links["approve"], "clear": True})
    if "reject" in links:
        actions.append({"action": "view", "label": "Reject", "url": links["reject"], "clear": True})
    if actions:
        body["actions"] = actions
    if "run" in links:
        body["click"] = links["run"]  # tapping the notification opens the run's page
    return body


def _mrkdwn(text: str) -> str:
    """Text Slack shows as written: its three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(channel: NotifyChannel, notice: Notice, links: dict[str, str]) -> dict[str, Any]:
    """An incoming webhook's message: ``text`` (the notification's words) and blocks, with
    buttons that open the links' pages (Slack opens a button's URL in the browser): Approve
    and Reject for an approval, and the run's page."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_mrkdwn(notice.title)}*\n{_mrkdwn(notice.words)}"}},
    ]
    buttons = []
    for action, label, style in (("approve", "Approve", "primary"), ("reject", "Reject", "danger"),
                                 ("run", "Open the run", None)):
        if action in links:
            button = {"type": "button", "text": {"type": "plain_text", "text": label}, "url": links[action],
                      "action_id": f"tether-{action}"}
            if style:
                button["style"] = style
            buttons.append(button)
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    return {"text": f"{notice.title}: {notice.words}", "blocks": blocks}


def redact(text: str, channel: NotifyChannel) -> str:
    """``text`` without the channel's secrets (its URL's path and query, topic, header
    values, what the environment filled in), nor any URL's path: a status line or a log
    line may say which host failed, never the address that is the password."""
    for secret in channel.secrets:
        text = text.replace(secret, "***")
    return re.sub(r"(https?://[^/\s'\"]+)/[^\s'\"]*", r"\1/***", text)


def shown_url(channel: NotifyChannel) -> str:
    """The channel's address as logs show it: the scheme, host and port only."""
    parts = urlsplit(channel.url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{host}"
