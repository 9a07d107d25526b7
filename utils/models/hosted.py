"""What every provider reached over HTTP with an API key shares: SDK clients made lazily and
shared between threads, the key and base URL read from the environment when first used
(never at import), a ``check()`` that names the missing variable, and a probe of the endpoint.

A new provider subclasses ``HostedModel``, names its environment variables, and writes
``make_client`` (the SDK's constructor, SDK retries off) and ``complete`` (one attempt).
This module registers nothing.
"""
from __future__ import annotations

import base64
import os
import threading
from typing import Any, Callable, ClassVar, Hashable
from urllib.parse import unquote, urlsplit, urlunsplit

from .call_errors import ModelConfigurationError
from .model import Model
from .pacing import endpoint_key
from .request import normalise_endpoint
from .retry import status_code
from ..redact import redact, register_secret


CLIENTS: dict[Hashable, Any] = {}
_clients_lock = threading.Lock()


def shared_client(key: Hashable, factory: Callable[[], Any]) -> Any:
    """The SDK client for ``key``, made by ``factory`` on first use and shared by every thread."""
    with _clients_lock:
        if key not in CLIENTS:
            CLIENTS[key] = factory()
        return CLIENTS[key]




def split_credentials(url: str | None) -> tuple[str | None, dict[str, str]]:
    """(``url`` without its user and password, the header that sends them), for a server
    behind a proxy that asks for HTTP basic auth (``http://user:password@host:port/v1``):
    ``Authorization: Basic base64(user:password)`` (RFC 7617; percent-escapes decoded, UTF-8,
    as httpx and requests send a URL's user and password). The password is redacted from
    then on. A URL without them: (url, {}).

    That header cannot carry an API key as well (``Bearer KEY``): the URL's credentials win,
    as they do when httpx (the openai SDK) or requests are given such a URL
    (docs/servers.md, "A server behind basic auth")."""
    split = urlsplit(url or "")
    if split.username is None:
        return url, {}
    user, password = unquote(split.username), unquote(split.password or "")
    register_secret(password)
    clean = urlunsplit(split._replace(netloc=split.netloc.rpartition("@")[2]))
    token = base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")
    return clean, {"Authorization": f"Basic {token}"}


def call_with_headers(resource: Any, method: str, **params: Any) -> tuple[Any, Any]:
    """(parsed answer, HTTP headers) of ``resource.method(**params)``, through the SDK's
    raw-response wrapper (the openai and anthropic SDKs have one): the headers carry the
    provider's rate-limit statement for the limiter. A body that is not JSON (a proxy's error
    page, a cut-off answer) raises JSONDecodeError, which the seam retries."""
    raw = getattr(resource.with_raw_response, method)(**params)
    return raw.parse(), raw.headers


def raise_if_unusable(model_name: str, exc: BaseException, where: str, key_env: str,
                      setter: str = "", credential: str = "the API key") -> None:
    """Classify a failed probe: an HTTP status other than 401/403 shows the endpoint is up
    (e.g. a proxy without the models route); a refused key or no answer stops the run."""
    status = status_code(exc)
    if status in (401, 403):
        raise ModelConfigurationError(redact(
            f"{model_name}: {where} refused {credential} (HTTP {status}); check {key_env}")) from None
    if status is None:
        raise ModelConfigurationError(redact(
            f"{model_name}: cannot reach {where}{setter}: {type(exc).__name__}: {exc}")) from None


class HostedModel(Model):
    """A model behind a provider's API key. Subclasses set ``api_key_env``,
    ``base_url_env`` and ``provider_label`` and implement ``make_client``."""

    api_key_env: ClassVar[str] = ""
    base_url_env: ClassVar[str] = ""
    provider_label: ClassVar[str] = "this provider's models"  # ends "... to use {label}"
    probe_timeout: ClassVar[float] = 10.0

    def __init__(self, name: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, **params: Any) -> None:
        super().__init__(name, **params)
        self._base_url = base_url
        self._api_key = api_key
        register_secret(api_key)

    # -- configuration (read when used, never at import) -------------------------------------
    def resolved_base_url(self) -> str | None:
        return self._base_url or os.environ.get(self.base_url_env) or None

    def resolved_api_key(self) -> str | None:
        return self._api_key or os.environ.get(self.api_key_env) or None

    def endpoint(self) -> str | None:
        return normalise_endpoint(self.resolved_base_url())

    def check(self) -> None:
        if not self.resolved_api_key():
            raise ModelConfigurationError(
                f"{self.name}: the environment variable {self.api_key_env} is not set; "
                f"export {self.api_key_env}=... to use {self.provider_label}")

    def limiter_key(self) -> tuple:
        return endpoint_key(self.provider, self.endpoint(), self.resolved_api_key())

    def probe(self) -> None:
        """List the provider's models once (a GET that costs nothing): a wrong base URL or a
        refused key stops the run here, not after every instance has spent its retries.
        Any other HTTP answer (a proxy without the models route) shows the server is up.
        Only the status is read: bodies differ (Together's is a bare list, which the openai
        SDK's page type cannot parse)."""
        client = self.client()
        url = str(getattr(client, "base_url", "") or self.resolved_base_url() or "the default endpoint")
        try:
            client.models.with_raw_response.list(timeout=self.probe_timeout)
        except Exception as exc:
            setter = f" (set by {self.base_url_env})" if self.base_url_env and self.resolved_base_url() else ""
            raise_if_unusable(self.name, exc, url, self.api_key_env, setter)

    def build_params(self, request: Any) -> dict:
        """The SDK call's keyword arguments for one request (adapters write it)."""
        raise NotImplementedError

    def wire_parameters(self, request: Any) -> dict | None:
        """The generation parameters of ``build_params`` (the body's, without the prompt)."""
        try:
            params = self.build_params(request)
        except NotImplementedError:
            return None
        out = {k: v for k, v in params.items()
               if k not in ("model", "messages", "system", "timeout", "extra_headers", "extra_body")}
        out.update(params.get("extra_body") or {})
        return out

    # -- the client --------------------------------------------------------------------------
    def make_client(self, base_url: str | None, api_key: str) -> Any:
        """A new SDK client with the SDK's own retries off (the seam retries)."""
        raise NotImplementedError

    def client(self) -> Any:
        """The SDK client shared by every thread for this class, base URL and key."""
        base_url, api_key = self.resolved_base_url(), self.resolved_api_key()
        if not api_key:
            self.check()
        return shared_client((type(self).__qualname__, base_url, api_key),
                             lambda: self.make_client(base_url, api_key))
