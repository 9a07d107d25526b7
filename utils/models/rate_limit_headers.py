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
from datetime import datetime
from typing import Mapping

from . import discover_models


_HEADER_FAMILIES: list[dict[str, tuple[str, str, str]]] = []


def header_family(*, tokens: tuple[str, str, str], requests: tuple[str, str, str]) -> dict:
    """Declare a provider's rate-limit header names, (limit, remaining, reset) for tokens and
    for requests (its module does, at import)."""
    family = {"tokens": tuple(tokens), "requests": tuple(requests)}
    if family not in _HEADER_FAMILIES:
        _HEADER_FAMILIES.append(family)
    return family


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(value: str | None, now: float | None = None) -> float | None:
    """Seconds in an OpenAI-style duration ("6m0s", "1.5s", "20ms") or a plain number of
    seconds, or until an RFC 3339 or HTTP date (Anthropic's reset times, a Retry-After); None
    if unreadable, or a date without its zone (it names no reliable instant)."""
    value = str(value or "").strip()
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
    for read_date in (lambda v: datetime.fromisoformat(v.replace("Z", "+00:00")),
                      email.utils.parsedate_to_datetime):
        try:
            when = read_date(value)
        except (TypeError, ValueError, IndexError):
            continue
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
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
        for kind, (limit_h, remaining_h, reset_h) in family.items():
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
