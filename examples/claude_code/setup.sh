#!/bin/sh
# Claude Code under Tether: a developer's Claude Code session becomes a run on Tether's store,
# seen from every console, and the calls that change things wait for an operator's decision.
#
#   examples/claude_code/setup.sh ~/src/shop       # then: cd ~/src/shop && claude
#   tether console                                  # the session's run, its calls, Approve / Reject
#
# What it sets up (docs/integrations.md, "Claude Code"):
#
# 1. The hooks, in the project's .claude/settings.json (every other setting is kept, and
#    installing again replaces Tether's hooks). The policy is in the hook's options:
#    - --matcher: the tools whose calls wait for a decision (Claude Code's PreToolUse
#      matcher, a regular expression over tool names); calls to other tools follow Claude
#      Code's own permissions, and their results are still recorded;
#    - --deadline: a call nobody decides within this many seconds is denied, in words (never
#      allowed); the hook's installed timeout is 30 s longer, so Claude Code never drops it;
#    - --budget: the session's run ends, and the session stops at its next hook, once its
#      usage (from Claude Code's transcript, at an assumed price) is worth this many dollars.
#    The store is not written into the project: the hooks use TETHER_STORE from Claude
#    Code's environment (a directory, or a postgresql:// URL), else ~/.tether/runs.
#
# 2. Standing rules on the store, which decide before anyone is asked (deny beats ask beats
#    allow). They apply to the runs of the agent named claude-code (the hook's --name):
#    - echo is harmless: allowed at once;
#    - rm is never run from this project: denied at once, and the model reads why;
#    - a Write waits for a person for 1 minute, then is declined.
#    Running this script again adds the rules again: list them with `tether rules`, remove
#    one with `tether rules remove ID`.
#
# A Stop from a console lands at the session's next hook: Claude Code offers no earlier
# interruption. Between hooks the run shows live while Claude Code's process lives.
set -eu

PROJECT=${1:-.}
TETHER=${TETHER:-tether}   # a command; the tests give "python -m tether.tui.cli"

$TETHER hook claude-code --install "$PROJECT" \
    --matcher 'Bash|Write|Edit|MultiEdit|NotebookEdit' --deadline 120 --budget 5

$TETHER rules add --allow Bash --agent claude-code --where 'command=echo *' \
    --reason "printing is harmless" --as setup
$TETHER rules add --deny Bash --agent claude-code --where 'command=rm *' \
    --reason "nothing is deleted from this project: ask a person to do it" --as setup
$TETHER rules add --ask Write --agent claude-code --deadline 1m --on-deadline reject \
    --reason "a new or rewritten file is read by a person first" --as setup
