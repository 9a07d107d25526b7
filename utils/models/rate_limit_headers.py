"""A provider's statement of its rate limits, read from an answer's headers.

Each provider declares the names of its headers (``header_family``, called at import by its
module: OpenAI/Together/vLLM ``x-ratelimit-*``, Anthropic ``anthropic-ratelimit-*``);
``stated_limits`` reads any declared family into sizes, what is left and when the budget is
full again. The limiter (pacing.py) paces by what this says.
"""
from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass
from typing import Mapping

from cupid.utils.models import discover_models


@dataclass(frozen=True)
class HeaderFamily:
    """A provider's rate-limit header names: (limit, remaining, reset) for tokens and for
    requests. Each provider's module declares its own (``header_family``)."""
    tokens: tuple[str, str, str]
    requests: tuple[str, str, str]


_HEADER_FAMILIES: list[HeaderFamily] = []


def header_family(*, tokens: tuple[str, str, str], requests: tuple[str, str, str]) -> HeaderFamily:
    """Declare a family of rate-limit headers (a provider's module does, at import)."""
    family = HeaderFamily(tuple(tokens), tuple(requests))
    if family not in _HEADER_FAMILIES:
        _HEADER_FAMILIES.append(family)
    return family


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(value: str | None, now: float | None = None) -> float | None:
    """Seconds in an OpenAI-style duration ("6m0s", "1.5s", "20ms"), a plain number of
    seconds, or an RFC 3339 / HTTP date (Anthropic's reset times); None if unreadable."""
    if value is None:
        return None
    value = str(value).strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if parts and "".join(a + b for a, b in parts) == value.replace(" ", ""):
        scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return sum(float(a) * scale[b] for a, b in parts)
    now = time.time() if now is None else now
    try:
        from datetime import datetime

        stamp = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        return max(0.0, stamp - now)
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


def duration_resolution(value: str | None) -> float:
    """The precision of a duration header: 0.001 for "20ms", 0.01 for "1.25s", 1 for "6m0s"."""
    value = (value or "").strip()
    if value.endswith("ms"):
        return 0.001
    digits = re.search(r"\.(\d+)s?$", value)
    return 10.0 ** -len(digits.group(1)) if digits else 1.0


@dataclass
class StatedLimit:
    """A provider's statement about one budget: its size, what is left, when it is full."""
    limit: float
    remaining: float
    reset_s: float | None
    resolution: float = 1.0

    def measured_rate(self) -> float | None:
        """Refill rate per second: exact for a linearly refilling bucket. None when the
        statement cannot tell (a full bucket, or a reset too short for the header's
        precision)."""
        used = self.limit - self.remaining
        if self.reset_s is not None and self.reset_s >= 10 * self.resolution and used > 0:
            return used / self.reset_s
        return None


def stated_limits(headers: Mapping[str, str] | None) -> dict[str, StatedLimit]:
    """{"tokens": ..., "requests": ...} from an answer's rate-limit headers (any provider's
    family)."""
    if not headers:
        return {}
    discover_models()
    lowered = {str(k).lower(): v for k, v in dict(headers).items()}
    out: dict[str, StatedLimit] = {}
    for family in _HEADER_FAMILIES:
        for kind, (limit_h, remaining_h, reset_h) in (("tokens", family.tokens),
                                                      ("requests", family.requests)):
            if kind in out or limit_h not in lowered or remaining_h not in lowered:
                continue
            try:
                limit, remaining = float(lowered[limit_h]), float(lowered[remaining_h])
            except (TypeError, ValueError):
                continue
            if limit > 0:
                reset = lowered.get(reset_h)
                out[kind] = StatedLimit(limit, max(0.0, remaining), parse_duration(reset),
                                        duration_resolution(reset))
    return out
