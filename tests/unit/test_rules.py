"""Standing rules (tether.vocab.rules): which rule decides a call, and what it says.

Deny beats ask beats allow whatever their scopes; among rules of one effect the narrowest
is cited (run over agent over store, then more argument patterns, a named agent or
source, an exact tool name), then the newest; an expired rule decides nothing; argument
keys may be JSON pointers and values need not be strings. A rule that cannot be made is
refused in words, one that may be fine later is a warning.
"""

from __future__ import annotations

import time

import pytest

from tether.approvals import Call, Rule, RuleError, check, decide, explain, format_duration, parse_duration, parse_where

NOW = time.mktime((2026, 12, 3, 12, 0, 0, 0, 0, -1))  # noon, local time: the cited date is the 3rd anywhere
CALL = Call("delete_file", {"path": "scratch/old.log"}, "ops", "tether", "run-1")


def rule(rid: str, effect: str, tool: str = "delete_file", *, age: float = 0.0, **kw) -> Rule:
    return Rule(effect, tool, kw.pop("reason", f"reason {rid}"), kw.pop("by", "alice"), id=rid,
                created=NOW - 100 + age, **kw)  # type: ignore[arg-type]


# ---- which rule decides ---------------------------------------------------------------------

@pytest.mark.parametrize("weaker,stronger", [("allow", "ask"), ("allow", "deny"), ("ask", "deny")])
def test_the_stronger_effect_decides_however_narrow_the_weaker_rule(weaker: str, stronger: str):
    narrow = rule("R1", weaker, scope="run:run-1", agent="ops", where=(parse_where("path=scratch/*.log"),))
    wide = rule("R2", stronger, "*")
    verdict = decide([narrow, wide], CALL, now=NOW)
    assert verdict is not None and verdict.rule.id == "R2" and verdict.effect == stronger
    assert {r.id for r in verdict.fitting} == {"R1", "R2"}


def test_among_rules_of_one_effect_the_narrowest_is_cited():
    store = rule("R1", "allow", "*", age=5)
    exact_tool = rule("R2", "allow", age=4)
    named_agent = rule("R3", "allow", "*", agent="ops", age=3)
    one_pattern = rule("R4", "allow", "*", where=(parse_where("path=*.log"),), age=2)
    agent_scope = rule("R5", "allow", "*", agent="ops", scope="agent", age=1)
    run_scope = rule("R6", "allow", "*", scope="run:run-1")
    rules = [store, exact_tool, named_agent, one_pattern, agent_scope, run_scope]
    cited = []
    while rules:
        verdict = decide(rules, CALL, now=NOW)
        assert verdict is not None
        cited.append(verdict.rule.id)
        rules = [r for r in rules if r is not verdict.rule]
    # run > agent scope > a pattern > a named agent > an exact tool name > a glob for the store
    assert cited == ["R6", "R5", "R4", "R3", "R2", "R1"]


def test_at_a_tie_the_newest_rule_is_cited():
    older, newer = rule("R1", "deny", age=0), rule("R2", "deny", age=10)
    assert decide([older, newer], CALL, now=NOW).rule.id == "R2"  # type: ignore[union-attr]
    assert decide([newer, older], CALL, now=NOW).rule.id == "R2"  # type: ignore[union-attr]


def test_no_rule_that_fits_leaves_the_call_to_people():
    rules = [rule("R1", "allow", "write_file"), rule("R2", "deny", agent="other"), rule("R3", "deny", source="acp"),
             rule("R4", "deny", scope="run:run-2"), rule("R5", "deny", where=(parse_where("path=*.tmp"),))]
    assert decide(rules, CALL, now=NOW) is None
    assert decide([], CALL, now=NOW) is None


def test_an_expired_rule_decides_nothing():
    expired = rule("R1", "deny", expires=NOW - 1)
    later = rule("R2", "deny", expires=NOW + 60)
    assert decide([expired], CALL, now=NOW) is None
    assert decide([expired, later], CALL, now=NOW).rule.id == "R2"  # type: ignore[union-attr]
    assert decide([later], CALL, now=NOW + 61) is None  # the same rule, once its time has come
    assert expired.expired(NOW) and not later.expired(NOW)


# ---- argument patterns --------------------------------------------------------------------

def test_a_json_pointer_reaches_nested_arguments_and_list_items():
    call = Call("deploy", {"options": {"force": True, "env": "prod"}, "paths": ["a/b", "c"], "a/b": {"~x": "y"}},
                "ops")
    assert rule("R1", "deny", "deploy", where=(parse_where("/options/env=prod"),)).misses(call) is None
    assert rule("R1", "deny", "deploy", where=(parse_where("/paths/0=a/*"),)).misses(call) is None
    assert rule("R1", "deny", "deploy", where=(parse_where("/a~1b/~0x=y"),)).misses(call) is None  # RFC 6901 escapes
    assert rule("R1", "deny", "deploy", where=(parse_where("/paths/5=*"),)).misses(call) == \
        "the call has no argument /paths/5"
    assert rule("R1", "deny", "deploy", where=(parse_where("/options/env=stag*"),)).misses(call) == \
        "/options/env is 'prod', which does not fit 'stag*'"


def test_values_that_are_not_strings_are_matched_as_their_json():
    call = Call("deploy", {"force": True, "replicas": 3, "tags": ["a", "b"], "none": None}, "ops")
    for where in ("force=true", "/force=true", "replicas=3", "replicas=[0-9]", 'tags=[[]"a",*]', "none=null"):
        assert rule("R1", "deny", "deploy", where=(parse_where(where),)).misses(call) is None, where
    assert rule("R1", "deny", "deploy", where=(parse_where("force=True"),)).misses(call) is not None  # JSON's spelling
    # A list's JSON starts with "[", which a glob reads as a set of characters: [[] is the bracket itself.
    assert rule("R1", "deny", "deploy", where=(parse_where('tags=["a","b"]'),)).misses(call) is not None


def test_every_pattern_of_a_rule_must_fit():
    both = rule("R1", "allow", where=(parse_where("path=scratch/*"), parse_where("path=*.log")))
    assert both.misses(CALL) is None
    one_off = rule("R1", "allow", where=(parse_where("path=scratch/*"), parse_where("path=*.txt")))
    assert one_off.misses(CALL) == "path is 'scratch/old.log', which does not fit '*.txt'"


def test_a_glob_matches_tool_names_case_sensitively():
    assert rule("R1", "deny", "delete_*").misses(CALL) is None
    assert rule("R1", "deny", "Delete_file").misses(CALL) == "the tool delete_file is not Delete_file"


# ---- words ----------------------------------------------------------------------------------

def test_a_decision_by_a_rule_cites_it_with_why_who_and_when():
    verdict = decide([rule("R3", "allow", reason="delete scratch logs")], CALL, now=NOW)
    assert verdict is not None
    assert verdict.words() == "approved by rule R3 (delete scratch logs; alice, 2026-12-03)"
    denied = decide([rule("R4", "deny", reason="never on prod", by="bob")], CALL, now=NOW)
    assert denied is not None and denied.words() == "rejected by rule R4 (never on prod; bob, 2026-12-03)"


def test_explain_says_which_rule_decides_and_why_each_other_does_not():
    rules = [rule("R1", "allow", "*", reason="all fine"), rule("R2", "deny", reason="no deletes", by="bob", age=1),
             rule("R3", "deny", "*", age=2), rule("R4", "allow", "write_file"),
             rule("R5", "deny", agent="qa"), rule("R6", "deny", expires=NOW - 10)]
    lines = explain(rules, CALL, now=NOW)
    assert lines[0] == "R2 decides: deny (deny delete_file; no deletes; bob)"
    assert "R1 fits too, but deny beats allow" in lines
    assert "R3 fits too, but R2 is narrower" in lines
    assert "R4 does not fit: the tool delete_file is not write_file" in lines
    assert "R5 does not fit: the agent is ops, not qa" in lines
    assert any(line.startswith("R6 does not fit: it expired 2026-12-03") for line in lines)
    assert len(lines) == len(rules)
    assert explain([], CALL, now=NOW) == ["no rule fits delete_file for agent ops: a person decides"]


def test_a_rule_describes_what_it_fits_and_does():
    assert rule("R1", "allow", where=(parse_where("path=*.log"),), agent="ops", source="acp").describe() == \
        "allow delete_file where path=*.log agent ops source acp"
    assert rule("R2", "ask", "deploy", approvals=2, deadline_s=600, on_deadline="escalate").describe() == \
        "ask 2 people, escalate after 10 min deploy"
    assert rule("R3", "ask", "deploy").describe() == "ask 1 person deploy"


def test_a_rule_comes_back_from_the_store_as_it_went():
    made = rule("R7", "ask", "deploy", agent="ops", where=(parse_where("/env=prod"), parse_where("tag=v*=x")),
                source="program", scope="agent", expires=NOW + 3600, approvals=2, deadline_s=90, on_deadline="stop")
    assert Rule.from_dict(made.to_dict()) == made
    assert Rule.from_dict({**made.to_dict(), "unknown_later_field": 1}) == made


# ---- making a rule: refused in words, or warned about ----------------------------------------

TOOLS = {"delete_file": {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": False},
         "list_dir": {"type": "object", "properties": {"path": {"type": "string"}}},
         "run_shell": {"type": "object", "properties": {"command": {"type": "string"}}, "additionalProperties": True},
         "mcp_thing": None}


@pytest.mark.parametrize("made,words", [
    (dict(effect="maybe"), "a rule allows, denies or asks; not 'maybe'"),
    (dict(tool=" "), "name the tool the rule is for"),
    (dict(reason=" "), "say why, with --reason TEXT"),
    (dict(source="web"), "--source is one of tether, acp, program, openai-agents, pydantic-ai, claude-code; not 'web'"),
    (dict(scope="agent"), "--scope agent needs --agent NAME"),
    (dict(scope="team"), "--scope is run:ID, agent or store; not 'team'"),
    (dict(scope="run:"), "--scope is run:ID, agent or store"),
    (dict(expires=NOW - 1), "the expiry is in the past: the rule would never apply"),
    (dict(expires=NOW), "the expiry is in the past"),
    (dict(effect="ask", approvals=0), "--approvals is a number of people from 1 to 5; not 0"),
    (dict(effect="ask", approvals=9), "from 1 to 5; not 9"),
    (dict(approvals=2), "--approvals and --deadline are for --ask rules"),
    (dict(deadline_s=60.0), "--approvals and --deadline are for --ask rules"),
    (dict(effect="ask", deadline_s=-1.0), "--deadline is a duration"),
    (dict(effect="ask", on_deadline="approve"), "--on-deadline is one of reject, stop, escalate; not 'approve'"),
    (dict(where=(parse_where("nokey=x"),)), "delete_file has no argument 'nokey' (its arguments: path), "
                                            "so the rule can never match"),
    # A tool's schema lists the arguments the model is offered: one that does not say is taken as closed.
    (dict(tool="list_dir", where=(parse_where("/depth=1"),)), "list_dir has no argument '/depth'"),
    (dict(tool="*_file", where=(parse_where("nokey=x"),)), "*_file has no argument 'nokey' (its arguments: path)"),
])
def test_a_rule_that_cannot_be_made_is_refused_in_words(made: dict, words: str):
    base = dict(effect="deny", tool="delete_file", reason="why", by="alice")
    with pytest.raises(RuleError, match=None) as refused:
        check(Rule(**{**base, **made}), tools=TOOLS, agents=["ops"], now=NOW)  # type: ignore[arg-type]
    assert words in str(refused.value)


@pytest.mark.parametrize("text,words", [
    ("path", "write KEY=GLOB"), ("=x", "write KEY=GLOB"), ("path=", "the pattern is empty"),
    ("/a//b=x", "has an empty step, so it can never match"),
])
def test_a_pattern_that_cannot_match_is_refused_as_typed(text: str, words: str):
    with pytest.raises(RuleError) as refused:
        parse_where(text)
    assert words in str(refused.value)


def test_an_unknown_tool_or_agent_is_a_warning_not_a_refusal():
    checked = check(Rule("allow", "not_yet", "why", "alice", agent="newcomer"), tools=TOOLS, agents=["ops"], now=NOW)
    assert checked.warnings == (
        "no tool known here is named 'not_yet' (known: delete_file, list_dir, mcp_thing, run_shell); "
        "the rule applies if one appears later",
        "no agent named 'newcomer' is known here; the rule applies if one appears later")
    known = check(Rule("allow", "delete_*", "why", "alice", agent="ops", where=(parse_where("path=*.log"),)),
                  tools=TOOLS, agents=["ops"], now=NOW)
    assert known.warnings == ()


def test_an_argument_an_open_or_unknown_schema_may_have_is_not_refused():
    # run_shell's schema allows more properties; mcp_thing's schema is unknown; * fits both.
    for tool in ("run_shell", "mcp_thing", "*"):
        check(Rule("deny", tool, "why", "alice", where=(parse_where("other=x"),)), tools=TOOLS, now=NOW)


# ---- durations ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,seconds", [("90s", 90), ("10m", 600), ("2h", 7200), ("7d", 604800), ("1w", 604800),
                                          ("1h30m", 5400), ("45", 45), ("500ms", 0.5), (" 2H ", 7200)])
def test_durations_as_typed(text: str, seconds: float):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10x", "0", "-5m", "0s", "1e999", "10m later"])
def test_a_duration_that_is_not_one_is_refused_in_words(text: str):
    with pytest.raises(RuleError, match="duration"):
        parse_duration(text)


def test_durations_are_worded_in_the_largest_whole_unit():
    assert [format_duration(s) for s in (30, 600, 5400, 172800)] == ["30 s", "10 min", "1.5 h", "2 d"]


def test_a_program_rule_fits_every_source_that_reports_through_the_run_api():
    from tether.approvals import Call, Rule, decide

    rule = Rule("allow", "Bash", "ls is harmless", "alice", id="R1", source="program")
    for source in ("program", "claude-code", "openai-agents", "pydantic-ai"):
        assert decide([rule], Call("Bash", {}, "a", source)) is not None, source  # type: ignore[arg-type]
    assert decide([rule], Call("Bash", {}, "a", "acp")) is None
    only = Rule("allow", "Bash", "ls is harmless", "alice", id="R2", source="claude-code")
    assert decide([only], Call("Bash", {}, "a", "claude-code")) is not None
    assert decide([only], Call("Bash", {}, "a", "pydantic-ai")) is None
