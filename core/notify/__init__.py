"""Notifications whose links decide (``[notify.NAME]`` in ``tether.toml``; docs/notifications.md).

* :mod:`tether.notify.channels`: the tables, checked (:class:`NotifyChannel`, :func:`load_channels`);
* :mod:`tether.notify.notices`: what is worth a notification, read from the runs' traces;
* :mod:`tether.notify.kinds`: what a webhook, ntfy and Slack are sent;
* :mod:`tether.notify.links`: signed links that approve or reject once (:func:`issue_link`,
  :func:`read_link`, :func:`spend_link`);
* :mod:`tether.notify.storage`: what is kept on the store (the key, spent links, the lease,
  the ledger, the status), with :mod:`tether.notify.pg_storage` for a PostgreSQL store;
* :mod:`tether.notify.sender`: the one sender per store (:func:`run_sender`, :func:`sender_status`);
* :mod:`tether.notify.command`: ``tether notify``.
"""

from tether.notify.channels import NotifyChannel, load_channels
from tether.notify.links import LinkClaim, LinkRefused, issue_link, read_link, spend_link
from tether.notify.sender import run_sender, sender_status

__all__ = ["LinkClaim", "LinkRefused", "NotifyChannel", "issue_link", "load_channels", "read_link", "run_sender",
           "sender_status", "spend_link"]
