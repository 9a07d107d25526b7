"""Models served by an OpenAI-compatible server (vLLM, llama.cpp's server, a proxy), addressed
as ``vllm:NAME`` / ``local-server:NAME`` (optionally ``NAME@http://host:port/v1``, or
``NAME@http://user:password@host:port/v1`` behind a proxy that asks for HTTP basic auth), and
PrefMatcher-7B (``kixlab/prefmatcher-7b``, config.PREFMATCHER_MODEL) on its vLLM server: small
subclasses of the OpenAI-compatible base (openai_compatible.py) that check the server before
any work and read the context it states.
"""
from __future__ import annotations

import itertools
import json
import logging
import re
import urllib.error
import urllib.request
from typing import Any

from ... import config
from .call_errors import ModelConfigurationError
from .hosted import split_credentials
from .model import register_model, register_provider
from .openai_compatible import OpenAICompatibleModel
from .request import Request, chat_messages, normalise_endpoint
from ..redact import mask_url_passwords

log = logging.getLogger("cupid.models")


# NAME, then the URL from the first "@http://" or "@https://" on (the URL may hold an "@" of
# its own: http://user:password@host).
_NAME_AT_URL = re.compile(r"^(.+?)@(https?://.+)$")


def split_name_and_url(spec: str | None) -> tuple[str | None, str | None]:
    """``NAME@http://host:port/v1`` -> (NAME, URL) (URL may list several, comma-separated,
    and hold a user and password: ``http://user:password@host:port/v1``); any other spec ->
    (spec, None)."""
    found = _NAME_AT_URL.match(spec) if spec else None
    return (found.group(1), found.group(2)) if found else (spec, None)


@register_provider("local-server")
@register_provider("vllm")
class VLLMModel(OpenAICompatibleModel):
    """A model served by an OpenAI-compatible server such as ``vllm serve``.

    The base URL comes from ``NAME@URL`` in the model spec, else ``base_url=``, else
    config.LOCAL_SERVER_BASE_URL (env CUPID_LOCAL_SERVER_URL); the API key from
    config.LOCAL_SERVER_API_KEY. A URL's user and password are sent as HTTP basic auth, in
    the Authorization header the key would take (hosted.py ``split_credentials``), to the
    chat route, the models list and ``/tokenize`` alike, and shown as ``user:***@host``.
    A JSON schema constrains decoding through the
    ``response_format={"type": "json_schema", ...}`` field, which current vLLM accepts
    (its older ``guided_json`` extra field was removed in vLLM 0.12).

    A server farm: ``NAME@URL1,URL2,...`` (or ``base_url="URL1,URL2"``) sends each request
    to the next URL in turn; the farm shares one rate limiter.
    """

    provider = "vllm"
    provider_label = "a model on an OpenAI-compatible server (vLLM, llama.cpp's, a proxy)"
    supports_json_schema = True
    url_env = "CUPID_LOCAL_SERVER_URL"
    api_key_env = "CUPID_LOCAL_SERVER_API_KEY"
    check_timeout = 5.0
    # The context the server states (check() reads it): prompt + max_tokens must fit.
    max_model_len: int | None = None

    def __init__(self, name: str | None = None, *, base_url: str | None = None, **params: Any) -> None:
        # A served model gets a "system" message and max_tokens, as the release's vLLM route
        # (PrefMatcher) sent them.
        name, url = split_name_and_url(name)
        url = url or base_url
        self._farm = [u.strip().rstrip("/") for u in url.split(",") if u.strip()] if url else []
        self._turn = itertools.count()
        super().__init__(name, base_url=self._farm[0] if self._farm else None, **params)

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

    def resolved_api_key(self) -> str:
        return self._api_key or config.LOCAL_SERVER_API_KEY or "EMPTY"

    # A served model takes the plain parameters whatever its name; what the server refuses
    # is its own (a context-length 400 is classified in retry.py).
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
        if self.resolved_api_key() != "EMPTY" and any(
                split_credentials(url)[1] for url in self.base_urls()):
            log.warning("%s: the server URL's user and password go as HTTP basic auth in the "
                        "Authorization header, so the API key (%s) is not sent; a proxy that "
                        "checks them in front of a server that wants the key sends it on "
                        "itself", self.name, self.api_key_env)
        lengths = [self._check_server(base_url) for base_url in self.base_urls()]
        stated = [n for n in lengths if n is not None]
        self.max_model_len = min(stated) if stated else None
        if not stated:
            log.info("%s: the server at %s does not state its context length; the run's "
                     "requests are not checked against it", self.name,
                     mask_url_passwords(", ".join(self.base_urls())))

    def _headers(self, base_url: str) -> tuple[str, dict[str, str]]:
        """(the URL to ask, its headers): the API key, or the URL's user and password."""
        url, credentials = split_credentials(base_url)
        return url, {"Authorization": f"Bearer {self.resolved_api_key()}", **credentials}

    def _check_server(self, base_url: str) -> int | None:
        """The server's models list: raise ModelConfigurationError when it cannot be read or
        does not list this model; return the model's ``max_model_len`` when stated."""
        clean, headers = self._headers(base_url)
        basic_auth = clean != base_url
        base_url = mask_url_passwords(base_url)  # as every message shows it
        url = f"{base_url}/models"
        http_request = urllib.request.Request(f"{clean}/models", headers=headers)
        hint = (f"start the server, or point {self.url_env} (or the NAME@URL form of the "
                f"model name) at it")
        try:
            with urllib.request.urlopen(http_request, timeout=self.check_timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                refused = (f"the user and password in its URL (HTTP basic auth, HTTP {exc.code})" if basic_auth
                           else f"the API key (HTTP {exc.code}); set {self.api_key_env}")
                raise ModelConfigurationError(f"{self.name}: the server at {url} refused {refused}") from exc
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
        root, headers = self._headers(self.base_urls()[0])
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        messages = chat_messages(Request(system_prompt=system_prompt,
                                         messages=[{"role": "user", "content": user_prompt}]),
                                 self.system_role)
        http_request = urllib.request.Request(
            f"{root}/tokenize", data=json.dumps({"model": self.name, "messages": messages}).encode(),
            headers={**headers, "Content-Type": "application/json"}, method="POST")
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
class PrefMatcherModel(VLLMModel):
    """PrefMatcher-7B served by vLLM (evaluation/serve_prefmatcher.sh).

    Name and URL come from config.PREFMATCHER_MODEL / config.PREFMATCHER_BASE_URL
    (env CUPID_PREFMATCHER_MODEL / CUPID_PREFMATCHER_URL).
    """

    model_name = config.PREFMATCHER_MODEL
    provider = "prefmatcher"
    url_env = "CUPID_PREFMATCHER_URL"

    def default_base_url(self) -> str:
        return config.PREFMATCHER_BASE_URL
