"""Open models hosted by Together AI, through its OpenAI-compatible endpoint.

Addressed as ``together:ORG/NAME`` or a bare ``org/name`` (e.g.
``meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo``). Chat calls go through the ``openai``
SDK with Together's base URL, as the released harness sends them: the SDK enforces the
request timeout (the ``together`` 1.x SDK sent it in the body and never enforced it) and
the request is the release's: a small subclass of the OpenAI-compatible base
(openai_compatible.py). The ``together`` SDK (2.x or later) is used only for the batch API
(``TogetherBatch``), whose presigned uploads the OpenAI SDK cannot do.

TOGETHER_API_KEY is required. TOGETHER_BASE_URL (read at the first call) points both
clients elsewhere; it may be given with or without the trailing ``/v1``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .catalog import ModelFacts, dated_table
from .hosted import shared_client
from .model import Completion, Request, register_provider
from .openai_compatible import (ChatCompletionsBatch, OpenAICompatibleModel, chat_batch_answers,
                                refused_parameter)
from .request import normalise_endpoint

# Prices (USD per million tokens, input and output, at the online rate) and context
# windows (prompt plus output tokens), as the sources said on the table's date
# (catalog.py looks them up). Together's pages are not in a stored source (as of 2026-11-23):
# the prices agree with the copies listed in docs/provider_sources.md; the windows (131,072,
# and 130,815 for 405B) are not confirmed in a stored source (as of 2026-11-23).
CATALOG = dated_table("together", date="2026-11-23", sources=(
        "https://www.together.ai/pricing and https://docs.together.ai/docs/serverless-models"), models={
    "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo": ModelFacts(0.18, 0.18, 131_072),
    "meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo": ModelFacts(0.88, 0.88, 131_072),
    "meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo": ModelFacts(3.50, 3.50, 130_815),
})


DEFAULT_ROOT = "https://api.together.xyz"


def api_root(base_url: str | None) -> str:
    """The host part of a Together base URL: ``https://api.together.xyz/v1/`` and
    ``https://api.together.xyz`` both give ``https://api.together.xyz``."""
    root = (base_url or DEFAULT_ROOT).rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def together_sdk_base_url(root: str, sdk_version: str) -> str:
    """The base URL the installed ``together`` SDK expects: 2.x appends paths to ``.../v1``,
    3.x puts ``/v1`` in its paths and takes the bare host."""
    major = int(sdk_version.split(".", 1)[0])
    return f"{root}/v1" if major < 3 else root


@register_provider("together")
class TogetherModel(OpenAICompatibleModel):
    provider = "together"
    api_key_env = "TOGETHER_API_KEY"
    base_url_env = "TOGETHER_BASE_URL"
    provider_label = "models hosted by Together"

    bare_names = "org/name"

    @classmethod
    def name_guess(cls, name: str) -> int:
        """Any ``org/name`` (the paper's ``meta-llama/...``), unless a prefix claims it."""
        return 1 if "/" in name else 0

    def make_client(self, base_url: str | None, api_key: str) -> Any:
        return super().make_client(f"{api_root(base_url)}/v1", api_key)

    def endpoint(self) -> str | None:
        """Together's host with or without ``/v1`` is one server."""
        return normalise_endpoint(api_root(self.resolved_base_url()))

    def batch_client(self) -> Any:
        """The ``together`` SDK's client (for its batch API), shared like ``client()``."""
        root, api_key = api_root(self.resolved_base_url()), self.resolved_api_key()
        if not api_key:
            self.check()

        def make() -> Any:
            import together

            return together.Together(api_key=api_key, max_retries=0,
                                     base_url=together_sdk_base_url(root, together.__version__))
        return shared_client(("together-sdk", root, api_key), make)

    def parameter_adaptation(self, exc: BaseException):
        # Together's API mirrors OpenAI's: a refused parameter is read with OpenAI's rule, online
        # and in a batch's error file (Together's own wording of such a 400 is not confirmed in a
        # stored source, as of 2026-11-23; its batch error lines are OpenAI's format).
        return refused_parameter(exc, self.overrides)

    def complete(self, request: Request) -> Completion:
        completion = super().complete(request)
        completion.text = _THINK_BLOCK.sub("", completion.text, count=1)
        return completion

    def batch_adapter(self) -> TogetherBatch:
        return TogetherBatch(self)


# Open reasoning models on Together (DeepSeek-R1, Qwen3 in thinking mode) write their
# reasoning into the answer, between <think> and </think> before the reply
# (https://docs.together.ai/docs/deepseek-r1: "its chain of thought/reasoning process in the
# form of thinking tokens between <think> tags and the answer"). The
# answer that is parsed is the reply alone; the tokens are counted by usage all the same.
_THINK_BLOCK = re.compile(r"\A\s*<think>.*?</think>\s*", re.S)


class TogetherBatch(ChatCompletionsBatch):
    """Together's batch API: OpenAI's JSONL lines and output files, its own upload (a
    presigned PUT) and job objects."""

    ended_early_states = ("FAILED", "EXPIRED", "CANCELLED")

    def line(self, custom_id: str, request: Request) -> dict:
        body = {k: v for k, v in self.model.build_params(request).items() if k != "timeout"}
        return {"custom_id": custom_id, "body": body}

    def submit(self, lines: list[dict]) -> str:
        import tempfile

        client = self.model.batch_client()
        with tempfile.TemporaryDirectory(prefix="cupid_batch_") as tmp:
            path = Path(tmp) / "cupid_batch.jsonl"
            path.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines),
                            encoding="utf-8")
            uploaded = client.files.upload(file=path, purpose="batch-api", check=False)
        created = client.batches.create(input_file_id=uploaded.id, endpoint=self.endpoint)
        return created.job.id

    def poll(self, batch_id: str) -> tuple[bool, str, int, int]:
        job = self.model.batch_client().batches.retrieve(batch_id)
        status = (job.status or "").upper()
        return (status in ("COMPLETED", *self.ended_early_states), status,
                int(job.progress or 0), 100)

    def fetch(self, batch_id: str) -> dict[str, Completion | str]:
        client = self.model.batch_client()
        job = client.batches.retrieve(batch_id)
        out: dict[str, Completion | str] = {}
        for file_id in (job.output_file_id, job.error_file_id):
            if file_id:
                out.update(chat_batch_answers(
                    client.files.content(file_id).read().decode("utf-8").splitlines(), self.model.name))
        return out
