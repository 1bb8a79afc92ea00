"""Queue workers: runs submitted to DBOS queues on PostgreSQL, driven by whichever worker takes them."""
