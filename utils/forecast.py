"""What both pipelines' ``--dry_run`` share: rendering a step's request without sending it,
and the per-role forecast of calls, tokens, cost and time.

A step's request is rendered by the step's own code: it runs with a ``RenderOnly`` model in
place of the role's model, which builds the request through ``Model.generate`` (the role's
name, temperature, max_tokens and the user's overrides) and stops at the point where a
request would be sent. So a forecast follows every change of a prompt or of how a step fills
it. Tokens are counted from the request's text with ``utils.models.tokens.estimate_tokens``.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from cupid.utils.models.model import Model
from cupid.utils.models.request import Request
from cupid.utils.models.tokens import CHARS_PER_TOKEN, estimate_tokens
from cupid.utils.models.usage import estimate_cost

TOKEN_COUNTING = (f"tokens are estimated from text length (utils/models/tokens.py estimate_tokens, "
                  f"{CHARS_PER_TOKEN:g} characters a token) of each request's system prompt and "
                  f"messages; providers' tokenizers and chat formatting differ by some percent")


class _Rendered(BaseException):
    """Raised by ``RenderOnly.complete`` with the request a step would send. A BaseException,
    so no retry loop or step error handler takes it for a failed call."""

    def __init__(self, request: Request):
        super().__init__("rendered")
        self.request = request


class RenderOnly(Model):
    """Stands in for a role's model: same name and generation parameters, never sends."""

    def __init__(self, model: Model):
        super().__init__(model.name, temperature=model.temperature, max_tokens=model.max_tokens,
                         max_retries=0)
        self.overrides = dict(getattr(model, "overrides", {}) or {})
        self.supports_json_schema = model.supports_json_schema
        self.supports_answer_grammar = model.supports_answer_grammar

    def complete(self, request: Request):
        raise _Rendered(request)

    def rate_limiter(self):
        return None


def render(call: Callable[[], object]) -> Request:
    """The request ``call`` (a step given a ``RenderOnly`` model) would send first."""
    try:
        call()
    except _Rendered as rendered:
        return rendered.request
    raise RuntimeError("the step sent no request")


def filler(tokens: int, word: str = "text") -> str:
    """A stand-in text of about ``tokens`` tokens under estimate_tokens."""
    unit = f"{word} "
    return (unit * (tokens * 4 // len(unit) + 1))[: tokens * 4].strip()


def request_tokens(request: Request) -> int:
    return estimate_tokens(request.system_prompt) + sum(
        estimate_tokens(m["content"]) for m in request.messages)


@dataclass
class RoleForecast:
    """The calls of one role (one model) in a forecast."""
    role: str
    model: str
    batchable: bool = True  # whether --batch sends this role's calls through a batch API
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    by_step: dict = field(default_factory=dict)  # step -> [calls, input, output]

    def add(self, step: str, input_tokens: int, output_tokens: int, calls: int = 1) -> None:
        self.calls += calls
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        entry = self.by_step.setdefault(step, [0, 0, 0])
        entry[0] += calls
        entry[1] += input_tokens
        entry[2] += output_tokens

    def add_request(self, step: str, request: Request, output_tokens: int) -> None:
        """One call of ``request``; its answer is capped at the request's max_tokens."""
        if request.max_tokens:
            output_tokens = min(output_tokens, int(request.max_tokens))
        self.add(step, request_tokens(request), output_tokens)

    def merge(self, other: "RoleForecast") -> None:
        for step, (calls, tin, tout) in other.by_step.items():
            self.add(step, tin, tout, calls)

    def cost(self, batch: bool) -> float | None:
        """USD online, or with --batch (a role that --batch leaves online pays the online price)."""
        tin, tout = self.input_tokens, self.output_tokens
        batched = batch and self.batchable
        return estimate_cost(self.model, tin, tout, tin if batched else 0, tout if batched else 0)


def batchable(model: Model) -> bool:
    """Whether --batch can send the model's calls through its provider's batch API."""
    return model.batch_adapter() is not None


def parse_limits(specs: Iterable[str]) -> dict:
    """--rate_limit specs -> {model name or "*": UserLimits} (ValueError on a bad spec)."""
    from cupid.utils.models.limits import parse_rate_limit

    return dict(parse_rate_limit(spec) for spec in specs)


def time_at_limits(model: str, calls: int, tokens: int, limits: dict) -> float | None:
    """Seconds ``calls`` requests of ``tokens`` tokens (input and output) to ``model`` take
    at least under the user's limits for that model (or for every model): the slower of
    requests/min and tokens/min. None when no limit on requests or tokens is known."""
    chosen = limits.get(model) or limits.get("*")
    if chosen is None:
        return None
    minutes = []
    if chosen.requests_per_minute:
        minutes.append(calls / chosen.requests_per_minute)
    if chosen.tokens_per_minute:
        minutes.append(tokens / chosen.tokens_per_minute)
    return round(max(minutes) * 60, 1) if minutes else None


def _sum_costs(costs: list[float | None]) -> float | None:
    return None if any(c is None for c in costs) else round(sum(costs), 6)


def summary(roles: list[RoleForecast], limits: dict) -> dict:
    """The JSON object of a forecast: per role and in total."""
    out_roles = {}
    for forecast in roles:
        seconds = time_at_limits(forecast.model, forecast.calls,
                                 forecast.input_tokens + forecast.output_tokens, limits)
        out_roles[forecast.role] = {
            "model": forecast.model, "calls": forecast.calls,
            "input_tokens": forecast.input_tokens, "output_tokens": forecast.output_tokens,
            "cost_usd": forecast.cost(False), "batch_cost_usd": forecast.cost(True),
            "priced": forecast.cost(False) is not None, "batchable": forecast.batchable,
            "time_s": seconds,
            "by_step": {step: {"calls": c, "input_tokens": i, "output_tokens": o}
                        for step, (c, i, o) in forecast.by_step.items()},
        }
    values = list(out_roles.values())
    # Roles of one model share its limits; different models run side by side, so the
    # slowest model bounds the run.
    per_model: dict[str, list[int]] = {}
    for v in values:
        calls_tokens = per_model.setdefault(v["model"], [0, 0])
        calls_tokens[0] += v["calls"]
        calls_tokens[1] += v["input_tokens"] + v["output_tokens"]
    times = [time_at_limits(m, c, t, limits) for m, (c, t) in per_model.items()]
    total = {"calls": sum(v["calls"] for v in values),
             "input_tokens": sum(v["input_tokens"] for v in values),
             "output_tokens": sum(v["output_tokens"] for v in values),
             "cost_usd": _sum_costs([v["cost_usd"] for v in values]),
             "batch_cost_usd": _sum_costs([v["batch_cost_usd"] for v in values]),
             "time_s": None if not values or any(t is None for t in times) else max(times)}
    return {"roles": out_roles, "total": total}


def _money(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:,.4f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def print_forecast(result: dict, header: list[str], rendered: str, assumptions: Sequence[str], *,
                   as_json: bool, out=None) -> None:
    """The table, then how tokens were counted, what was rendered (``rendered``) and what
    the rest assumes; with ``as_json`` the same as one JSON object on the last line."""
    notes = [f"how: {TOKEN_COUNTING}.", f"{rendered}, assuming:"] + [f"  - {a}" for a in assumptions]
    out = sys.stdout if out is None else out
    for line in header:
        print(line, file=out)
    rows = [("role", "model", "calls", "input tok", "output tok", "cost online", "cost --batch",
             "time at limits")]
    for role, v in result["roles"].items():
        rows.append((role, v["model"], f"{v['calls']:,}", f"{v['input_tokens']:,}",
                     f"{v['output_tokens']:,}", _money(v["cost_usd"]), _money(v["batch_cost_usd"]),
                     _duration(v["time_s"])))
    t = result["total"]
    rows.append(("total", "", f"{t['calls']:,}", f"{t['input_tokens']:,}", f"{t['output_tokens']:,}",
                 _money(t["cost_usd"]), _money(t["batch_cost_usd"]), _duration(t["time_s"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))),
              file=out)
    unpriced = [f"{role} ({v['model']})" for role, v in result["roles"].items() if v["cost_usd"] is None]
    if unpriced:
        print(f"unpriced: {', '.join(unpriced)}: no price in its provider's dated table (CATALOG in utils/models/; a self-hosted "
              f"model costs its hardware); the total cost is then unknown", file=out)
    if any(v["time_s"] is None for v in result["roles"].values()):
        print("time: unknown without --rate_limit [MODEL=]tpm=N,rpm=N (a run learns the provider's "
              "limits from its response headers, which a dry run does not ask for)", file=out)
    for note in notes:
        print(note, file=out)
    if as_json:
        print(json.dumps(result, sort_keys=False), file=out)
