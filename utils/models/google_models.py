"""Google's Gemini models through the ``google-genai`` SDK (``from google import genai``).

Addressed as ``google:NAME`` or a bare ``gemini-*`` name. The Gemini API is used with the
key in GOOGLE_API_KEY (GEMINI_API_KEY is accepted too); Vertex AI instead when
GOOGLE_CLOUD_PROJECT is set (region from GOOGLE_CLOUD_LOCATION, default us-central1, and
application-default credentials). GOOGLE_GEMINI_BASE_URL points the Gemini API client
elsewhere.

Request building and response parsing are plain functions (``build_request``,
``parse_response``) so they are tested without the network. The SDK's own retries are off
(one attempt); the seam in model.py retries, reading ``APIError.code`` as the HTTP status.
"""
from __future__ import annotations

import os
import re
from typing import Any

from .catalog import ModelFacts, dated_table
from .model import (
    Completion,
    ModelConfigurationError,
    PermanentModelError,
    Request,
    TransientModelError,
    Usage,
    register_provider,
)
from .batch import BatchAdapter, BatchItemError
from .hosted import HostedModel, raise_if_unusable, shared_client
from .adaptations import refused_temperature

# How a Gemini answer ended (endings.py): ``finishReason`` as google-genai documents it
# (types.FinishReason, google-genai 3.6: STOP "a natural stopping point", MAX_TOKENS
# "the maximum number of tokens allowed by the max_output_tokens parameter", SAFETY "the
# content potentially violates safety policies", RECITATION, BLOCKLIST, PROHIBITED_CONTENT,
# SPII, IMAGE_SAFETY, MODEL_ARMOR and the image ones stopped by a filter), and a prompt refused
# before any candidate (``promptFeedback.blockReason``, types.BlockedReason: "the reason why the
# prompt was blocked"). OTHER, LANGUAGE and the tool-call reasons are left to the shared rule.
FINISH_SIGNALS = {"STOP": "stop", "MAX_TOKENS": "length",
                  **dict.fromkeys(("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                                   "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION",
                                   "MODEL_ARMOR"), "filtered"),
                  "promptFeedback.blockReason": "blocked"}

# Prices (USD per million tokens, input and output, at the online rate) and context
# windows (prompt plus output tokens), as the sources said on the table's date
# (catalog.py looks them up). Google's pricing page is quoted in stored copies
# (docs/provider_sources.md); Gemini 2.0 Flash's and Flash-Lite's prices and the two
# experiments' windows are not confirmed in a stored source (as of 2026-11-23).
_GEMINI_WINDOW = 1_048_576
CATALOG = dated_table("google", date="2026-11-23", sources=(
        "https://ai.google.dev/gemini-api/docs/models and "
        "https://ai.google.dev/gemini-api/docs/pricing (prompts up to 200k tokens)"), models={
    "gemini-2.0-pro-exp-02-05": ModelFacts(None, None, 2_097_152),  # experimental: unpriced
    "gemini-2.0-flash-thinking-exp-01-21": ModelFacts(None, None, _GEMINI_WINDOW),
    "gemini-2.0-flash": ModelFacts(0.10, 0.40, _GEMINI_WINDOW),
    "gemini-2.0-flash-lite": ModelFacts(0.075, 0.30, _GEMINI_WINDOW),
    # Cached input (prompts up to 200k tokens): 2.5 Pro's $0.125 as quoted from the pricing
    # page in discuss.ai.google.dev/t/question-about-gemini-api-caching-pricing/107349; 2.5
    # Flash's $0.03 and Flash-Lite's $0.01 in github.com/dalisys/landingAi api-pricing.md (a
    # copy of the page). The 2.0 models' cached prices are not confirmed in a stored source (as
    # of 2026-11-23): priced as input.
    "gemini-2.5-pro": ModelFacts(1.25, 10.00, _GEMINI_WINDOW, 0.125),
    "gemini-2.5-flash": ModelFacts(0.30, 2.50, _GEMINI_WINDOW, 0.03),
    "gemini-2.5-flash-lite": ModelFacts(0.10, 0.40, _GEMINI_WINDOW, 0.01),
})


DEFAULT_LOCATION = "us-central1"

# gRPC-style statuses of Google errors that carry no numeric code.
_TRANSIENT_STATUSES = {"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED",
                       "ABORTED", "UNKNOWN"}


def build_request(request: Request, model: str) -> dict:
    """The keyword arguments of ``client.models.generate_content`` for one request."""
    contents = [{"role": "model" if m["role"] == "assistant" else "user",
                 "parts": [{"text": m["content"]}]} for m in request.messages]
    budget = request.thinking_budget
    generation = {name: value for name, value in (
        ("system_instruction", request.system_prompt or None), ("temperature", request.temperature),
        ("max_output_tokens", request.max_tokens), ("seed", request.seed),
        ("thinking_config", None if budget is None else {"thinking_budget": budget})) if value is not None}
    if request.timeout is not None:
        # HttpOptions.timeout is in milliseconds; this one attempt, no SDK retries.
        generation["http_options"] = {"timeout": int(request.timeout * 1000),
                                      "retry_options": {"attempts": 1}}
    return {"model": model, "contents": contents, "config": generation}


def parse_response(response: Any, model: str = "gemini") -> Completion:
    """Text (thought parts dropped), usage and finish signal of a GenerateContentResponse. A
    prompt blocked before any candidate (``prompt_feedback.block_reason``) is an answer with
    no text whose signal is "promptFeedback.blockReason", its prompt tokens counted."""
    feedback = response.prompt_feedback
    block_reason = feedback.block_reason if feedback is not None else None
    if not response.candidates and not block_reason:
        raise TransientModelError(f"{model}: malformed response without candidates")
    candidate = response.candidates[0] if response.candidates else None
    parts = (candidate.content.parts if candidate is not None and candidate.content else None) or []
    texts = [part.text for part in parts if isinstance(part.text, str) and not part.thought]
    # MAX_TOKENS: the answer hit max_output_tokens, which thinking tokens count against as
    # observed in github.com/googleapis/python-genai/issues/2062 (which says Google's thinking
    # guide states otherwise) and github.com/stanford-crfm/helm/pull/3804: a thinking model may
    # end with a cut answer, or with no text at all.
    finish = candidate.finish_reason if candidate is not None else "promptFeedback.blockReason"
    usage = response.usage_metadata
    if usage is not None:
        # Thinking tokens are billed as output (https://ai.google.dev/gemini-api/docs/pricing:
        # output prices "per 1M tokens (including thinking tokens)", as transcribed in
        # github.com/api-evangelist/gemini plans/gemini-plans-pricing.yml) and reported apart
        # from the answer's (thoughts_token_count): count them with the completion. The prompt
        # tokens read from a cache (cached_content_token_count) are part of prompt_token_count,
        # billed at the cached price (discuss.ai.google.dev/t/question-about-gemini-api-caching-
        # pricing/107349 reads a response's usage so).
        thoughts = usage.thoughts_token_count or 0
        usage = Usage(usage.prompt_token_count or 0, (usage.candidates_token_count or 0) + thoughts,
                      reasoning_tokens=thoughts, cached_prompt_tokens=usage.cached_content_token_count or 0)
    words = None
    if block_reason and candidate is None:
        name = getattr(block_reason, "name", block_reason)
        words = f"{name}: {feedback.block_reason_message}" if feedback.block_reason_message else str(name)
    return Completion(text="".join(texts), usage=usage, finish=finish, refusal=words)


def map_error(exc: BaseException, model: str = "gemini") -> BaseException:
    """Make a google.genai APIError classifiable by the seam.

    An error with a numeric ``code`` (the HTTP status) is classified as it is; one without
    (a malformed error body) is mapped through its gRPC status name.
    """
    code = getattr(exc, "code", None)
    if isinstance(code, int) and 100 <= code < 600:
        return exc
    status = str(getattr(exc, "status", "") or "").upper()
    if status in _TRANSIENT_STATUSES or not status:
        return TransientModelError(f"{model}: {exc}")
    return PermanentModelError(f"{model}: {status}: {exc}")


# Thinking per family: the names' pattern, the family, the lowest and highest thinking budget,
# whether 0 turns thinking off, whether it thinks without a budget, and the thoughts one call
# spends under dynamic thinking (no budget, or -1 on every thinking model). Google's table
# (https://ai.google.dev/gemini-api/docs/thinking, "Set the thinking budget"; not in a stored
# source as of 2026-11-23, its rows copied in github.com/snailyp/gemini-balance/issues/195): 2.5
# Pro 128 to 32768, "cannot disable thinking"; 2.5 Flash 0 to 24576; 2.5 Flash-Lite 512 to
# 24576, 0 disables, and "Model does not think" without a budget. Gemini 2.5 Pro's refusal of 0:
# "Budget 0 is invalid. This model only works in thinking mode." (github.com/vercel/ai/issues/8027).
# The thoughts of dynamic thinking are our assumption for --dry_run's forecast, not a measurement
# (Google documents only the budgets' ranges); a run's recorded thoughts replace them
# (utils/forecast.py). The first pattern that matches decides.
GEMINI_THINKING: tuple[tuple[str, str, int, int, bool, bool, int], ...] = (
    (r"gemini-2\.5-pro", "2.5 Pro", 128, 32768, False, True, 3000),
    (r"gemini-2\.5-flash-lite", "2.5 Flash-Lite", 512, 24576, True, False, 1500),
    (r"gemini-2\.5-flash", "2.5 Flash", 1, 24576, True, True, 1500),
    # Gemini 3 and later: thinking_level is their own control; a budget is accepted for
    # compatibility, but 0 is refused (e.g. github.com/googleapis/python-genai/issues/2936,
    # gemini-3.5-flash-lite) and the server judges the range.
    (r"gemini-([3-9]|\d\d)", "3 and later", 1, 1_000_000, False, True, 3000),
)
OTHER_THINKING_TOKENS = 3000  # another Gemini model that thinks (an experiment): as 2.5 Pro
# Gemini 2.0 models (but the thinking experiment) have no thinking and take no thinking_config
# (not confirmed in a stored source).
NO_THINKING = re.compile(r"gemini-(1\.|2\.0-(?!flash-thinking))")


def thinking_family(name: str) -> tuple | None:
    """The row of GEMINI_THINKING whose pattern ``name`` matches, or None."""
    return next((row for row in GEMINI_THINKING if re.match(row[0], name.lower())), None)


@register_provider("google")
class GoogleModel(HostedModel):
    provider = "google"
    finish_signals = FINISH_SIGNALS
    reasoning_options = ("thinking_budget",)
    api_key_env = "GOOGLE_API_KEY"
    alternative_key_env = "GEMINI_API_KEY"
    project_env = "GOOGLE_CLOUD_PROJECT"
    location_env = "GOOGLE_CLOUD_LOCATION"
    base_url_env = "GOOGLE_GEMINI_BASE_URL"

    bare_names = "gemini-*"
    provider_label = "Google's Gemini models"
    families = (*((family, "thinking_budget " + (f"{low}..{high}" if high < 1_000_000 else "> 0 (the server judges)")
                   + (", 0 off" if can_turn_off else "")
                   + f", -1 dynamic (default: {'dynamic' if thinks else 'off'})")
                  for _, family, low, high, can_turn_off, thinks, _ in GEMINI_THINKING),
                ("no thinking", "none (1.x, 2.0)"))

    @classmethod
    def name_guess(cls, name: str) -> int:
        return 2 if name.lower().startswith("gemini-") else 0

    @classmethod
    def family_of(cls, name: str) -> str:
        if NO_THINKING.match(name.lower()):
            return "no thinking"
        row = thinking_family(name)
        return row[1] if row else ""

    def __init__(self, name: str | None = None, *, project: str | None = None, location: str | None = None,
                 **params: Any) -> None:
        super().__init__(name, **params)
        self._project = project
        self._location = location

    # -- configuration (read when used) ------------------------------------------------------
    def resolved_project(self) -> str | None:
        return self._project or os.environ.get(self.project_env) or None

    def resolved_location(self) -> str:
        return self._location or os.environ.get(self.location_env) or DEFAULT_LOCATION

    def resolved_api_key(self) -> str | None:
        return super().resolved_api_key() or os.environ.get(self.alternative_key_env) or None

    def endpoint(self) -> str | None:
        if self.uses_vertex():
            return f"vertex:{self.resolved_project()}/{self.resolved_location()}"
        return super().endpoint()

    def uses_vertex(self) -> bool:
        return self.resolved_project() is not None

    def check(self) -> None:
        if self.uses_vertex():
            try:
                import google.auth
                from google.auth.exceptions import DefaultCredentialsError
            except ImportError as exc:
                raise ModelConfigurationError(
                    f"{self.name}: Vertex AI ({self.project_env} is set) needs google-auth: "
                    f"pip install google-genai") from exc
            try:
                google.auth.default()
            except DefaultCredentialsError as exc:
                raise ModelConfigurationError(
                    f"{self.name}: {self.project_env} is set, so Vertex AI is used, but no "
                    f"application-default credentials were found; run `gcloud auth "
                    f"application-default login` or set GOOGLE_APPLICATION_CREDENTIALS") from exc
            return
        if not self.resolved_api_key():
            raise ModelConfigurationError(
                f"{self.name}: the environment variable {self.api_key_env} is not set; "
                f"export {self.api_key_env}=... (or set {self.project_env} to use Vertex AI)")

    def probe(self) -> None:
        """List one model (free): an unreachable endpoint or a refused key stops the run
        before any work; any other HTTP answer shows the endpoint is up."""
        client = self.client()
        where = self.resolved_base_url() or ("Vertex AI" if self.uses_vertex() else "the Gemini API")
        try:
            next(iter(client.models.list(config={"page_size": 1})), None)
        except Exception as exc:
            raise_if_unusable(self.name, exc, where, self.api_key_env, credential="the credentials")

    def client(self) -> Any:
        if not self.uses_vertex():
            return super().client()
        return shared_client((type(self).__qualname__, self.endpoint()), lambda: self.make_client(None, None))

    def make_client(self, base_url: str | None, api_key: str | None) -> Any:
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=base_url, retry_options=types.HttpRetryOptions(attempts=1))
        if self.uses_vertex():
            return genai.Client(vertexai=True, project=self.resolved_project(),
                                location=self.resolved_location(), http_options=options)
        return genai.Client(api_key=api_key, http_options=options)

    def validate_overrides(self, overrides: dict) -> None:
        super().validate_overrides(overrides)
        budget = overrides.get("thinking_budget")
        if budget is None:
            return
        if NO_THINKING.match(self.name.lower()):
            raise ModelConfigurationError(f"{self.name}: thinking_budget={budget}: this model "
                                          f"does not think (Gemini 2.5 and later do)")
        row = thinking_family(self.name)
        if budget == -1 or row is None:
            return
        _, _, low, high, can_turn_off, _, _ = row
        if budget == 0 and can_turn_off:
            return
        if not low <= budget <= high:
            off = "0 turns thinking off, " if can_turn_off else "thinking cannot be turned off; "
            raise ModelConfigurationError(f"{self.name}: thinking_budget={budget} is outside {low}..{high} "
                                          f"({off}-1 is dynamic)")

    def reasoning_forecast(self, request: Request) -> tuple[int, str]:
        """Within max_output_tokens, which thoughts count against (``parse_response``)."""
        name, budget, row = self.name.lower(), request.thinking_budget, thinking_family(self.name)
        if NO_THINKING.match(name) or budget == 0:
            return 0, "no thinking" if budget is None else "thinking_budget 0: no thinking"
        if budget is not None and budget > 0:
            tokens, basis = budget, f"thinking_budget {budget:,} (set), spent in full: an upper bound"
        elif budget is None and row is not None and not row[5]:
            return 0, "no thinking unless thinking_budget is set"
        elif row is None and not name.startswith("gemini-"):
            return 0, "no figure known for this model"
        else:
            tokens = row[6] if row else OTHER_THINKING_TOKENS
            basis = f"dynamic thinking: {tokens:,} tokens a call, our assumption"
        return min(tokens, request.max_tokens) if request.max_tokens else tokens, basis

    def parameter_adaptation(self, exc: BaseException):
        return refused_temperature(exc, self.overrides, str(getattr(exc, "message", "") or exc))

    def wire_parameters(self, request: Request) -> dict | None:
        return {k: v for k, v in self.build_request(request)["config"].items()
                if k not in ("system_instruction", "http_options")}

    def build_request(self, request: Request) -> dict:
        built = build_request(request, self.name)
        if any(a.parameter == "temperature" for a in self.learned_adaptations()):
            built["config"].pop("temperature", None)
        return built

    def batch_adapter(self) -> GeminiBatch | None:
        """The Gemini API's batch mode; Vertex AI's (through Cloud Storage) is not used."""
        return None if self.uses_vertex() else GeminiBatch(self)

    def complete(self, request: Request) -> Completion:
        from google.genai import errors

        try:
            response = self.client().models.generate_content(**self.build_request(request))
        except errors.APIError as exc:
            mapped = map_error(exc, self.name)
            if mapped is exc:
                raise
            raise mapped from exc
        return parse_response(response, self.name)


# A batch item's error is a google.rpc.Status, whose code is a gRPC code; its HTTP status as
# google/rpc/code.proto maps it ("HTTP Mapping: 400 Bad Request" for INVALID_ARGUMENT, ...;
# github.com/googleapis/googleapis). A code of 100 and above is taken as an HTTP status already.
GRPC_HTTP_STATUS = {3: 400, 9: 400, 11: 400, 16: 401, 7: 403, 5: 404, 6: 409, 10: 409, 8: 429,
                    1: 499, 2: 500, 12: 501, 13: 500, 15: 500, 14: 503, 4: 504}


class GeminiBatch(BatchAdapter):
    """Gemini batch mode with inline requests (``client.batches``), each keyed by metadata."""

    ended_early_states = ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")

    def line(self, custom_id: str, request: Request) -> dict:
        params = self.model.build_request(request)
        config = {k: v for k, v in params["config"].items() if k != "http_options"}
        return {"contents": params["contents"], "config": config, "metadata": {"key": custom_id}}

    def submit(self, lines: list[dict]) -> str:
        return self.model.client().batches.create(model=self.model.name, src=lines).name

    def poll(self, batch_id: str) -> tuple[bool, str, int, int]:
        job = self.model.client().batches.get(name=batch_id)
        state = str(getattr(job.state, "value", job.state))
        responses = (job.dest.inlined_responses if job.dest is not None else None) or []
        ended = state == "JOB_STATE_SUCCEEDED" or self.ended_early(state)
        return ended, state, len(responses), len(responses)

    def fetch(self, batch_id: str) -> dict[str, Completion | str]:
        job = self.model.client().batches.get(name=batch_id)
        out: dict[str, Completion | str] = {}
        for item in (job.dest.inlined_responses if job.dest is not None else None) or []:
            key = (item.metadata or {}).get("key")
            if key is None:
                continue
            if item.error is not None and item.error.code is not None:
                # As the SDK raises it online (its HTTP status, Google's message), so that a
                # refused parameter is learned with the rule applied online.
                status = GRPC_HTTP_STATUS.get(item.error.code, item.error.code)
                out[key] = BatchItemError(f"HTTP {status}: {item.error.message}", status,
                                          {"code": status, "message": item.error.message})
                continue
            if item.error is not None or item.response is None:
                out[key] = f"failed in the batch: {item.error}"
                continue
            try:
                out[key] = parse_response(item.response, self.model.name)
            except Exception as exc:  # a blocked or malformed item fails alone
                out[key] = f"{type(exc).__name__}: {exc}"
        return out
