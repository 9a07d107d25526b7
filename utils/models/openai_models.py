"""OpenAI, and any OpenAI-compatible server (vLLM, PrefMatcher-7B), through the ``openai`` SDK.

Addressed as ``openai:NAME`` (or a bare ``gpt-*``/``o1*``/``o3*``/``o4*`` name),
``vllm:NAME`` / ``local-server:NAME`` (optionally ``NAME@http://host:port/v1``), and
``kixlab/prefmatcher-7b`` (config.PREFMATCHER_MODEL) for the PrefMatcher server.

Nothing here runs at import: the SDK is imported, keys are read and clients are made on the
first call. One client is shared by every thread per (adapter class, base URL, API key); the
SDK's own retries are off (``max_retries=0``) because the seam in model.py retries.
"""
from __future__ import annotations

import inspect
import itertools
import json
import logging
import re
import time
import urllib.error
import urllib.request
from typing import Any, Callable

import config
from utils.models.adaptations import Adaptation
from utils.models.hosted import HostedModel, call_sdk_with_headers
from utils.models.cache import ResponseCache
from utils.models.errors import ModelConfigurationError, TransientModelError
from utils.models.retry import status_code
from utils.models.registry import register_model, register_provider
from utils.models.request import Completion, Request, Usage, normalise_endpoint

log = logging.getLogger("cupid.models")


def chat_messages(request: Request, system_role: str = "system") -> list[dict]:
    """The OpenAI-style message list: the system prompt (if any) as a ``system_role``
    message, then the conversation."""
    messages = [{"role": system_role, "content": request.system_prompt}] if request.system_prompt else []
    messages.extend({"role": m["role"], "content": m["content"]} for m in request.messages)
    return messages


def parse_chat_completion(response: Any, model_name: str) -> Completion:
    """Text and usage of an OpenAI-style chat completion; a malformed one is transient."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise TransientModelError(f"{model_name}: malformed response without choices")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None)
    if not isinstance(text, str):
        raise TransientModelError(f"{model_name}: malformed response without message content "
                                  f"(finish_reason={getattr(choices[0], 'finish_reason', None)!r})")
    usage = getattr(response, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", None)
    completion_tokens = getattr(usage, "completion_tokens", None)
    # completion_tokens counts the hidden reasoning tokens too (billed as output);
    # completion_tokens_details.reasoning_tokens says how many of them there were
    # (openai-python, src/openai/types/completion_usage.py).
    details = getattr(usage, "completion_tokens_details", None)
    reasoning_tokens = getattr(details, "reasoning_tokens", None) or 0
    return Completion(
        text=text,
        usage=(Usage(prompt_tokens or 0, completion_tokens or 0, reasoning_tokens=reasoning_tokens)
               if usage is not None else None),
        raw=response,
        # "length": the answer hit max_tokens / max_completion_tokens (or the context).
        truncated=getattr(choices[0], "finish_reason", None) == "length",
    )


# ---------------------------------------------------------------------------------------
# OpenAI
# ---------------------------------------------------------------------------------------
def with_seed_and_timeout(params: dict, request: Request) -> dict:
    """The request's seed and timeout, where set, in an OpenAI-format call's parameters."""
    if request.seed is not None:
        params["seed"] = request.seed
    if request.timeout is not None:
        params["timeout"] = request.timeout
    return params


def apply_adaptations(params: dict, adaptations) -> dict:
    """Leave out (or rename) the parameters a provider refused for this model (adaptations.py)."""
    for adaptation in adaptations:
        if adaptation.parameter in params:
            value = params.pop(adaptation.parameter)
            if adaptation.renamed_to:
                params[adaptation.renamed_to] = value
    return params


def send_chat_completion(model: HostedModel, request: Request) -> Completion:
    """One chat completion through an OpenAI-format SDK client (OpenAI's, Together's), with
    the response headers the pacing reads."""
    client = model.client()
    response, headers = call_sdk_with_headers(model.name, client.chat.completions, "create",
                                              **model.build_params(request))
    completion = parse_chat_completion(response, model.name)
    completion.headers = headers
    return completion


class OpenAIFamily:
    """What one family of OpenAI models accepts on the chat completions API."""

    def __init__(self, name: str, *, token_field: str | None = None, temperature: bool = True,
                 temperature_with_effort: tuple[str, ...] = (),
                 efforts: tuple[str, ...] = ()) -> None:
        self.name = name
        # None: the role's field (config.ROLE_PARAMS); else the only one the family accepts.
        self.token_field = token_field
        self.temperature = temperature                  # a non-default temperature accepted
        self.temperature_with_effort = temperature_with_effort  # ... only at these efforts
        self.efforts = efforts                          # reasoning_effort values accepted

    def takes_temperature(self, effort: str | None) -> bool:
        return self.temperature or (effort is not None and effort in self.temperature_with_effort)


# The rules per family, each with its source. Reasoning models (o-series, gpt-5 family)
# reject max_tokens ("Unsupported parameter: 'max_tokens' is not supported with this model.
# Use 'max_completion_tokens' instead.", code unsupported_parameter) and any temperature but
# the default 1 ("Unsupported value: 'temperature' does not support 0 with this model. Only
# the default (1) value is supported.", code unsupported_value); the bodies as reported in
# e.g. github.com/griptape-ai/ComfyUI-Griptape/issues/312 (gpt-5) and
# github.com/gabrii/Cursor-Azure-GPT-5/issues/33, github.com/OpenHands/OpenHands/issues/4131
# (o1-mini); OpenAI's reasoning guide: https://platform.openai.com/docs/guides/reasoning.
O_SERIES = OpenAIFamily(
    "o-series", token_field="max_completion_tokens", temperature=False,
    # reasoning_effort on o1 (not o1-mini/o1-preview), o3, o3-mini, o4-mini: low/medium/high
    # (https://platform.openai.com/docs/api-reference/chat/create#chat-create-reasoning_effort).
    efforts=("low", "medium", "high"))
O1_EARLY = OpenAIFamily("o1-mini/o1-preview", token_field="max_completion_tokens",
                        temperature=False)
# gpt-5, gpt-5-mini, gpt-5-nano (2025-08-07): reasoning models, effort minimal..high
# (https://platform.openai.com/docs/guides/latest-model, "GPT-5" section; the API reference
# of reasoning_effort: "gpt-5 ... minimal").
GPT5 = OpenAIFamily("gpt-5", token_field="max_completion_tokens", temperature=False,
                    efforts=("minimal", "low", "medium", "high"))
GPT5_PRO = OpenAIFamily("gpt-5-pro", token_field="max_completion_tokens", temperature=False,
                        efforts=("high",))
# gpt-5.1 and later: effort "none" added (the default of gpt-5.1), and temperature/top_p
# accepted only when the effort is "none" (https://platform.openai.com/docs/guides/latest-model,
# "GPT-5.1 ... reasoning_effort none"; github.com/langchain-ai/langchain/pull/35424).
GPT5_1 = OpenAIFamily("gpt-5.1+", token_field="max_completion_tokens", temperature=False,
                      temperature_with_effort=("none",),
                      efforts=("none", "low", "medium", "high", "xhigh"))
# gpt-5-chat-latest, gpt-5.1-chat-latest: the non-reasoning ChatGPT models; they take a
# temperature (https://platform.openai.com/docs/models/gpt-5-chat-latest) but, as every
# model since o1, count their limit in max_completion_tokens (max_tokens is deprecated:
# https://platform.openai.com/docs/api-reference/chat/create#chat-create-max_tokens).
GPT5_CHAT = OpenAIFamily("gpt-5-chat", token_field="max_completion_tokens")
# gpt-4o, gpt-4.1, gpt-4o-mini, gpt-3.5: the paper's family; both token fields, any
# temperature, no reasoning options. The release sent max_tokens for the evaluated model
# and max_completion_tokens for the evaluator (config.ROLE_PARAMS), and so do we.
GPT4 = OpenAIFamily("gpt-4.x")
# A name none of the rules knows (a model released after them): sent as a gpt-4.x model;
# a refusal of temperature or max_tokens is learned (``parameter_adaptation``), and a
# reasoning_effort the user asks for is passed on for the server to judge.
UNKNOWN = OpenAIFamily("unknown", efforts=("none", "minimal", "low", "medium", "high", "xhigh"))


def openai_family(name: str) -> OpenAIFamily:
    lowered = name.lower().split("/")[-1]
    if re.match(r"o1-(mini|preview)", lowered):
        return O1_EARLY
    if re.match(r"o\d", lowered):
        return O_SERIES
    if re.match(r"gpt-5(\.\d+)?-chat", lowered):
        return GPT5_CHAT
    if re.match(r"gpt-5(\.\d+)?-pro", lowered):
        return GPT5_PRO
    if re.match(r"gpt-5\.\d", lowered):
        return GPT5_1
    if re.match(r"gpt-5(-|$)", lowered):
        return GPT5
    if lowered.startswith(("gpt-4", "gpt-3.5", "chatgpt-4o")):
        return GPT4
    return UNKNOWN


@register_provider("openai")
class OpenAIModel(HostedModel):
    """OpenAI chat completions. Honours OPENAI_BASE_URL (read at the first call).

    ``system_role`` ("system" or "developer") is the role of the system prompt's message and
    ``max_tokens_field`` ("max_tokens" or "max_completion_tokens") the field of the token
    limit; config.ROLE_PARAMS sets them per role as the released harness sent them. The
    model's family (``openai_family``) may override both choices: reasoning models take only
    max_completion_tokens and no temperature but their default.
    """

    provider = "openai"
    api_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    provider_label = "OpenAI models"
    learns_parameters = True
    reasoning_options = ("reasoning_effort",)

    def __init__(self, name: str | None = None, *, system_role: str = "system",
                 max_tokens_field: str = "max_tokens", **params: Any) -> None:
        if system_role not in ("system", "developer"):
            raise ValueError(f"system_role must be 'system' or 'developer', got {system_role!r}")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_field must be 'max_tokens' or 'max_completion_tokens', "
                             f"got {max_tokens_field!r}")
        super().__init__(name, **params)
        self.system_role = system_role
        self.max_tokens_field = max_tokens_field

    def family(self) -> OpenAIFamily:
        return openai_family(self.name)

    def is_reasoning_model(self) -> bool:
        return not self.family().temperature

    def validate_overrides(self, overrides: dict) -> None:
        super().validate_overrides(overrides)
        family = self.family()
        effort = overrides.get("reasoning_effort")
        if effort is not None and effort not in family.efforts:
            takes = (f"it takes {', '.join(family.efforts)}" if family.efforts
                     else "it is not a reasoning model")
            raise ModelConfigurationError(
                f"{self.name}: reasoning_effort={effort} is not accepted by the {family.name} "
                f"family ({takes})")
        if "temperature" in overrides and not family.takes_temperature(effort):
            raise ModelConfigurationError(
                f"{self.name}: the {family.name} family accepts no temperature but its default"
                + (f" (except with reasoning_effort={family.temperature_with_effort[0]})"
                   if family.temperature_with_effort else ""))

    def parameter_adaptation(self, exc: BaseException) -> Adaptation | None:
        """OpenAI's 400 naming a parameter the model does not take: temperature is then not
        sent, max_tokens is sent as max_completion_tokens. A temperature the user chose is
        not dropped: the call fails with the provider's words instead."""
        if status_code(exc) != 400:
            return None
        body = getattr(exc, "body", None)
        body = body if isinstance(body, dict) else {}
        code = getattr(exc, "code", None) or body.get("code")
        param = getattr(exc, "param", None) or body.get("param")
        if code not in ("unsupported_parameter", "unsupported_value"):
            return None
        if param == "temperature" and "temperature" not in self.overrides:
            return Adaptation("temperature", None, code)
        if param == "max_tokens" and code == "unsupported_parameter":
            return Adaptation("max_tokens", "max_completion_tokens", code)
        return None

    def make_client(self, base_url: str | None, api_key: str) -> Any:
        import openai

        return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0)

    # -- one attempt -------------------------------------------------------------------------
    def build_params(self, request: Request) -> dict:
        family = self.family()
        params: dict[str, Any] = {"model": self.name,
                                  "messages": chat_messages(request, self.system_role)}
        if request.temperature is not None and family.takes_temperature(request.reasoning_effort):
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params[family.token_field or self.max_tokens_field] = request.max_tokens
        if request.reasoning_effort is not None:
            params["reasoning_effort"] = request.reasoning_effort
        apply_adaptations(params, self.learned_adaptations())
        return with_seed_and_timeout(params, request)

    def complete(self, request: Request) -> Completion:
        return send_chat_completion(self, request)


# ---------------------------------------------------------------------------------------
# OpenAI-compatible servers (vLLM)
# ---------------------------------------------------------------------------------------
def split_name_and_url(spec: str | None) -> tuple[str | None, str | None]:
    """``NAME@http://host:port/v1`` -> (NAME, URL) (URL may list several, comma-separated);
    any other spec -> (spec, None)."""
    if spec:
        name, sep, url = spec.rpartition("@")
        if sep and name and url.startswith(("http://", "https://")):
            return name, url
    return spec, None


@register_provider("local-server")
@register_provider("vllm")
class OpenAICompatibleModel(OpenAIModel):
    """A model served by an OpenAI-compatible server such as ``vllm serve``.

    The base URL comes from ``NAME@URL`` in the model spec, else ``base_url=``, else
    config.LOCAL_SERVER_BASE_URL (env CUPID_LOCAL_SERVER_URL); the API key from
    config.LOCAL_SERVER_API_KEY. A JSON schema constrains decoding through the
    ``response_format={"type": "json_schema", ...}`` field, which current vLLM accepts
    (its older ``guided_json`` extra field was removed in vLLM 0.12).

    A server farm: ``NAME@URL1,URL2,...`` (or ``base_url="URL1,URL2"``) sends each request
    to the next URL in turn; the farm shares one rate limiter.
    """

    provider = "vllm"
    supports_json_schema = True
    url_env = "CUPID_LOCAL_SERVER_URL"
    key_env = "CUPID_LOCAL_SERVER_API_KEY"
    check_timeout = 5.0
    # The context the server states (check() reads it): prompt + max_tokens must fit.
    max_model_len: int | None = None

    def __init__(self, name: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, temperature: float | None = 0.0,
                 max_tokens: int | None = None, timeout: float | None = None,
                 max_retries: int | None = None, cache: ResponseCache | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        # A served model gets a "system" message and max_tokens, as the release's vLLM route
        # (PrefMatcher) sent them.
        name, url = split_name_and_url(name)
        url = url or base_url
        self._farm = [u.strip().rstrip("/") for u in url.split(",") if u.strip()] if url else []
        self._turn = itertools.count()
        super().__init__(name, base_url=self._farm[0] if self._farm else None, api_key=api_key,
                         temperature=temperature, max_tokens=max_tokens, timeout=timeout,
                         max_retries=max_retries, cache=cache, sleep=sleep)

    def default_base_url(self) -> str:
        return config.LOCAL_SERVER_BASE_URL

    def resolved_base_url(self) -> str:
        if len(self._farm) > 1:  # round-robin; itertools.count is atomic under the GIL
            return self._farm[next(self._turn) % len(self._farm)]
        return (self._base_url or self.default_base_url()).rstrip("/")

    def base_urls(self) -> list[str]:
        return list(self._farm) if len(self._farm) > 1 else [self.resolved_base_url()]

    def endpoint(self) -> str | None:
        return normalise_endpoint(",".join(self.base_urls()))

    def limiter_key(self) -> tuple:
        from utils.models.limits import endpoint_key

        return endpoint_key(self.provider, ",".join(self.base_urls()), self.resolved_api_key())

    def resolved_api_key(self) -> str:
        return self._api_key or config.LOCAL_SERVER_API_KEY or "EMPTY"

    # A served model takes the plain parameters whatever its name; what the server refuses
    # is its own (a context-length 400 is classified in retry.py).
    learns_parameters = False
    reasoning_options = ()

    def family(self) -> OpenAIFamily:
        return GPT4

    def context_window(self) -> int | None:
        """The context the server states (``check()`` reads it), whatever the name."""
        return self.max_model_len

    def build_params(self, request: Request) -> dict:
        params = super().build_params(request)
        if request.json_schema is not None:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.json_schema},
            }
        return params

    def probe(self) -> None:
        """check() already asked the server for its models."""

    def check(self) -> None:
        """GET {base}/models on every server: each must be up and serve this model before
        any work starts. Sets ``max_model_len`` to the smallest context the servers state
        (vLLM lists it with each model), or None when none states one."""
        lengths = [self._check_server(base_url) for base_url in self.base_urls()]
        stated = [n for n in lengths if n is not None]
        self.max_model_len = min(stated) if stated else None
        if not stated:
            log.info("%s: the server at %s does not state its context length; the run's "
                     "requests are not checked against it", self.name, ", ".join(self.base_urls()))

    def _check_server(self, base_url: str) -> int | None:
        """The server's models list: raise ModelConfigurationError when it cannot be read or
        does not list this model; return the model's ``max_model_len`` when stated."""
        url = f"{base_url}/models"
        http_request = urllib.request.Request(
            url, headers={"Authorization": f"Bearer {self.resolved_api_key()}"})
        hint = (f"start the server, or point {self.url_env} (or the NAME@URL form of the "
                f"model name) at it")
        try:
            with urllib.request.urlopen(http_request, timeout=self.check_timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise ModelConfigurationError(
                    f"{self.name}: the server at {url} refused the API key (HTTP {exc.code}); "
                    f"set {self.key_env}") from exc
            raise ModelConfigurationError(
                f"{self.name}: {url} answered HTTP {exc.code}; is this an OpenAI-compatible "
                f"server? {hint}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ModelConfigurationError(
                f"{self.name}: cannot reach the OpenAI-compatible server at {url} ({reason}); "
                f"{hint}") from exc
        try:
            listing = json.loads(body)
        except ValueError as exc:
            raise ModelConfigurationError(
                f"{self.name}: {url} did not answer with JSON; is this an OpenAI-compatible "
                f"server? {hint}") from exc
        served = served_models(listing)
        if not served:  # a proxy that lists nothing: the chat route will say
            return None
        if self.name not in served:
            first = sorted(served)[0]
            ask = (f"set CUPID_PREFMATCHER_MODEL={first}" if self.name == config.PREFMATCHER_MODEL
                   else f"ask for {self.provider}:{first}@{base_url}")
            raise ModelConfigurationError(
                f"{self.name}: the server at {base_url} serves {', '.join(sorted(served))}, not "
                f"{self.name}; {ask}, or serve this name (vLLM: --served-model-name "
                f"{self.name}; llama.cpp: --alias {self.name})")
        return served[self.name]

    def count_prompt_tokens(self, system_prompt: str, user_prompt: str) -> int | None:
        """The prompt's tokens as the server counts them, chat template included, through
        vLLM's ``POST /tokenize`` (beside ``/v1``); None when the server has no such route
        or does not answer."""
        root = self.base_urls()[0]
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        messages = chat_messages(Request(system_prompt=system_prompt,
                                         messages=[{"role": "user", "content": user_prompt}]),
                                 self.system_role)
        http_request = urllib.request.Request(
            f"{root}/tokenize", data=json.dumps({"model": self.name, "messages": messages}).encode(),
            headers={"Authorization": f"Bearer {self.resolved_api_key()}",
                     "Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(http_request, timeout=self.check_timeout) as response:
                count = json.loads(response.read()).get("count")
        except (urllib.error.URLError, OSError, ValueError, AttributeError):
            return None
        return count if isinstance(count, int) and count >= 0 else None


def served_models(listing: Any) -> dict[str, int | None]:
    """{model id: its context length, or None} from an OpenAI-format models list. vLLM
    states ``max_model_len`` with each model; OpenAI, llama.cpp's servers and most proxies
    state none."""
    entries = listing.get("data") if isinstance(listing, dict) else listing
    served: dict[str, int | None] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            length = entry.get("max_model_len")
            served[entry["id"]] = length if isinstance(length, int) and length > 0 else None
    return served


@register_model
class PrefMatcherModel(OpenAICompatibleModel):
    """PrefMatcher-7B served by vLLM (evaluation/serve_prefmatcher.sh).

    Name and URL come from config.PREFMATCHER_MODEL / config.PREFMATCHER_BASE_URL
    (env CUPID_PREFMATCHER_MODEL / CUPID_PREFMATCHER_URL).
    """

    model_name = config.PREFMATCHER_MODEL
    provider = "prefmatcher"
    url_env = "CUPID_PREFMATCHER_URL"

    def __init__(self, name: str | None = None, **params: Any) -> None:
        accepted = inspect.signature(OpenAICompatibleModel.__init__).parameters
        super().__init__(name or config.PREFMATCHER_MODEL,
                         **{k: v for k, v in params.items() if k in accepted})

    def default_base_url(self) -> str:
        return config.PREFMATCHER_BASE_URL


def prefmatcher_model(**params: Any) -> PrefMatcherModel:
    """The PrefMatcher model with the matcher role's parameters (temperature 0)."""
    merged = dict(config.ROLE_PARAMS.get("matcher", {}))
    merged.update(params)
    return PrefMatcherModel(**merged)
