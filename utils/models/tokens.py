"""Token counts without the providers' tokenizers.

The providers' tokenizers are not all available offline (tiktoken downloads its tables at
first use; Anthropic's and Google's are server-side), so the harness estimates from text
length where it must count before a request is sent: the cost estimate of ``--dry_run`` and
the context-window check. Real runs record the token counts the provider reports.

English prose and markdown average about four characters per token under the tokenizers of
GPT-4o (o200k_base), Claude and Llama 3; ``estimate_tokens`` uses that ratio.
``lower_bound_tokens`` is for refusing a request as too long: it assumes a generous eight
characters per token, so a request it calls too long is too long under any of them.
"""
from __future__ import annotations

import math

CHARS_PER_TOKEN = 4.0
MAX_CHARS_PER_TOKEN = 8.0


def estimate_tokens(text: str | None) -> int:
    """A typical token count for ``text`` (about four characters a token)."""
    return math.ceil(len(text or "") / CHARS_PER_TOKEN)


def lower_bound_tokens(text: str | None) -> int:
    """A count that ``text`` is all but certain to reach under any current tokenizer."""
    return max(1, math.floor(len(text) / MAX_CHARS_PER_TOKEN)) if text else 0
