# What vulture reports as unused in tether/ and is not: `make test` runs
#   vulture tether/ .vulture_whitelist.py
# with the options in pyproject.toml ([tool.vulture]: confidence 60, and Textual's
# conventional names and @on handlers, which the framework calls, ignored by pattern).
# Made with `vulture tether/ --make-whitelist`, then kept to the real false positives.
# A name here counts as used everywhere in tether/: add one only with its reason.

# ---- called by Python, a framework or a library, never by our code ----------------------
__getattr__  # the lazy public names of `import tether` (PEP 562)
__dir__  # the same, for dir(tether)
model_config  # pydantic reads it (core/agents/config.py)
_.field_title_should_be_set  # pydantic's GenerateJsonSchema hook (core/agents/tools/function.py)
_.capture_signals  # uvicorn's Server hook, overridden (core/demo/provider/server.py)
_.should_exit  # uvicorn's Server reads it
_.pipe_data_received  # asyncio's SubprocessProtocol (core/workspaces/setup.py)
_.process_exited
_.connection_lost
_.highlight  # rich's Highlighter protocol (trace_view.KindHighlighter)
_.get_default_screen  # Textual App hook
_.check_action  # Textual App hook
_.get_selection  # Textual Widget hooks (text selection)
_.selection_updated
_.disabled  # Textual widget property, set to enable a button
layout  # a parameter of HeaderTitle.update, kept in the override's signature (header.py)

# ---- found by name or by value, not by a reference ---------------------------------------
scan_archive  # the demo tool, referenced as "tether.demo:scan_archive"
DRIP  # a FaultKind, parsed from its value ("drip@0")
total_tokens  # event fields: written to the trace as records, read there by name
estimated
workspace_kind  # the same (WorkspaceReady: what kind of workspace the run found or made)
preview

# ---- the public surface (tether.__all__, a documented contract) ----------------------------
_.resumable  # Status.resumable (Status is in tether.__all__; README's run contract)
LISTING_KEYS  # the keys of `tether runs --json` (docs/run-store.md)
resume  # tether.integrations.openai_agents.resume: a paused run gone on with by another process (docs/integrations.md)

# ---- kept for the tests, the crash campaign and the benchmarks, on purpose -----------------
install  # faultpoints.install: the crash campaign's hook into the loop's boundaries
merge_check  # tether.workspaces.merge: the merge's dry run, a library function the merge decision (issue 38) will call
running_provider  # the scripted provider in-process (core/demo/provider/server.py's docstring)
_.compact  # RunHandle.compact: a compaction the watchers and the index must survive
_.resets  # TraceTail.resets: how often a follower read the journal again from the start
_.store_ready  # the console's surface for the tests, scenes and benchmarks
_.trace_lines
_.stop_all
_.line_count
_.screen_text

# ---- ACP: the acp package calls the client's methods by name; fields are recorded data ----
_.request_permission  # acp's Client protocol (core/acp/handler.py)
_.read_text_file
_.write_text_file
_.receive  # acp's Transport (core/acp/transport.py)
context_used  # UsageReported: what the agent says of its context, kept for the cost meter
context_size
cost_currency
agent_version  # AgentSession: a trace record's field (tether watch, the console)
_acp_or_model  # a pydantic model_validator, called by pydantic
_.set_session_mode  # acp's Agent protocol, called by name (core/acp/server.py)
_.set_config_option
_duration  # a pydantic field_validator (core/agents/config.py), called by pydantic
_one_scope  # a pydantic model_validator of [budgets.NAME] (core/agents/config.py)
_ttl  # pydantic field_validators of a [notify.NAME] table (core/notify/channels.py)
_priority
NOTIFY_TABLES  # the notifications' tables, which the PostgreSQL tests empty (tests/notify)
describes  # RuleAdded: a trace record's field (tether watch, the console)
period  # FleetBudgetLevel: a trace record's fields, read by the notifications (core/notify/notices.py)
spent_usd

# ---- tether serve: read by the pages' templates (core/web/templates), by name ----------
stoppable  # RunView: whether the run page offers Stop
mergeable  # RunView: whether the run page offers Merge
discardable  # RunView: whether the run page offers Discard
args_shown  # Card: the arguments as the page shows them
source_shown
