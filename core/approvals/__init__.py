"""One approvals model for every source of runs: Tether's loop, ACP agents, programs.

A call that needs approval is decided by a standing rule (:mod:`.rules`) or by people
(one, or two for a two-person tool), possibly with edited arguments, before a deadline
(:mod:`.deadlines`), with a preview of what it would change (:mod:`.preview`); every
decision is a row of the store's record (:mod:`.audit`).
"""

from tether.vocab.audit import DecisionQuery, DecisionRecord, records_of, run_source
from tether.vocab.rules import (
    Call, Checked, Rule, RuleError, Verdict, Where, check, decide, explain, format_duration, parse_duration,
    parse_where,
)

__all__ = [
    "Call", "Checked", "DecisionQuery", "DecisionRecord", "Rule", "RuleError", "Verdict", "Where", "check", "decide",
    "explain", "format_duration", "parse_duration", "parse_where", "records_of", "run_source",
]
