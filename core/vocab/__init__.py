"""The words every room shares: a run's state and its events, Stop, people, prices, the
idempotency ledger, and how records are worded. The bottom room: it imports no other, so the
run, the stores, the agents and the approvals can all import it without importing each other."""
