"""The PostgreSQL store: runs in tables, ownership under advisory locks, changes by LISTEN/NOTIFY."""
