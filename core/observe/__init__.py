"""How a run is seen from outside: the JSONL trace, OpenTelemetry spans, and the report of a finished run."""
