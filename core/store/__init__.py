"""Where runs live: the words every part of the product shares (protocol, owner, summary,
decisions, control, operate, unix, changes, follow), two stores that import only those (files/,
postgres/), and the one place that picks a store (spec)."""
