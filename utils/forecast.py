"""What both pipelines' ``--dry_run`` share: rendering a step's request without sending it,
and the per-role forecast of calls, tokens, cost and time.

A step's request is rendered by the step's own code: it runs with a ``RenderOnly`` model in
place of the role's model, which builds the request through ``Model.generate`` (the role's
name, temperature, max_tokens and the user's overrides) and stops at the point where a
request would be sent. So a forecast follows every change of a prompt or of how a step fills
it. Tokens are counted from the request's text with ``utils.models.tokens.estimate_tokens``.

Reasoning (thinking) tokens are billed as output: each call of a role adds what its model
is expected to spend (``Model.forecast_reasoning_tokens``, from the effort or budget the
request sets, per family in each provider's file), or, when an earlier run in the output
directory recorded some for that model, the mean per call it recorded
(``recorded_reasoning``). They count in the output tokens and the cost, and are shown apart.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from .errors import BadInput
from .io import read_json
from .models.hosted import HostedModel
from .models.model import Model
from .models.request import Request
from .models.tokens import CHARS_PER_TOKEN, estimate_tokens
from .models.usage import estimate_cost

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
        self.constrain = model.constrain  # the request as the model itself would hold it

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


@dataclass
class RoleForecast:
    """The calls of one role (one model) in a forecast."""
    role: str
    model: str
    batchable: bool = True  # whether --batch sends this role's calls through a batch API
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0     # the answers and the reasoning: what is billed as output
    reasoning_tokens: int = 0  # the part of output_tokens spent reasoning
    by_step: dict = field(default_factory=dict)  # step -> [calls, input, output, reasoning]
    # (tokens one call of a request spends reasoning, why): ``role_forecast`` sets it.
    reasoning: Callable[[Request], tuple[int, str]] | None = field(default=None, repr=False)
    reasoning_basis: str = ""
    in_process: bool = False  # answered in this process (the embedded model, a user's __call__): no rate limit

    def add(self, step: str, input_tokens: int, output_tokens: int, calls: int = 1,
            reasoning_tokens: int = 0) -> None:
        self.calls += calls
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.reasoning_tokens += reasoning_tokens
        entry = self.by_step.setdefault(step, [0, 0, 0, 0])
        for i, n in enumerate((calls, input_tokens, output_tokens, reasoning_tokens)):
            entry[i] += n

    def add_request(self, step: str, request: Request, output_tokens: int) -> None:
        """One call of ``request``; its answer is capped at the request's max_tokens, and the
        reasoning the role's model spends on it is added to the output."""
        if request.max_tokens:
            output_tokens = min(output_tokens, int(request.max_tokens))
        reasoning = 0
        if self.reasoning is not None:
            reasoning, basis = self.reasoning(request)
            self.reasoning_basis = self.reasoning_basis or basis
        input_tokens = estimate_tokens(request.system_prompt) + sum(estimate_tokens(m["content"])
                                                                    for m in request.messages)
        self.add(step, input_tokens, output_tokens + reasoning, reasoning_tokens=reasoning)

    def merge(self, other: "RoleForecast") -> None:
        for step, (calls, tin, tout, reasoning) in other.by_step.items():
            self.add(step, tin, tout, calls, reasoning)
        self.reasoning_basis = self.reasoning_basis or other.reasoning_basis
        self.in_process = self.in_process or other.in_process

    def cost(self, batch: bool) -> float | None:
        """USD online, or with --batch (a role that --batch leaves online pays the online price)."""
        tin, tout = self.input_tokens, self.output_tokens
        batched = batch and self.batchable
        return estimate_cost(self.model, tin, tout, tin if batched else 0, tout if batched else 0)


def role_forecast(role: str, model: Model, batch: bool | None = None,
                  recorded: dict[str, float] | None = None) -> RoleForecast:
    """A role's forecast whose calls reason as ``model``'s do: the mean per call an earlier
    run recorded for it (``recorded``, from ``recorded_reasoning``), else the model's own
    figure for each request (``Model.forecast_reasoning_tokens``). ``batch``: whether --batch
    sends the role's calls through a batch API (default: whether the model has one)."""
    forecast = RoleForecast(role, model.name, model.batch_adapter() is not None if batch is None else batch)
    forecast.in_process = not isinstance(model, HostedModel)  # no provider's server, no rate limit
    mean = (recorded or {}).get(model.name)
    if mean is not None:
        basis = f"{mean:,.0f} tokens a call, the mean the earlier run in the output directory recorded"
        forecast.reasoning = lambda request: (round(mean), basis)
    else:
        forecast.reasoning = lambda request: (model.forecast_reasoning_tokens(request),
                                              model.reasoning_forecast_basis(request))
    return forecast


def recorded_reasoning(directory: str | Path) -> dict[str, float]:
    """{model name: reasoning tokens per call} as an earlier run in ``directory`` recorded
    them: from the evaluation's instance files (each step's ``usage.reasoning_tokens`` over
    its ``attempts``), else from the usage per role of results.json (``this_invocation``) or
    of synthesis's summary.json (``reasoning_tokens`` over ``calls``). Only models that
    recorded some: a provider that does not report reasoning apart from the output
    (Anthropic) records 0, which says nothing. Unreadable files are passed over."""
    directory = Path(directory)
    from_steps: dict[str, list[int]] = {}
    from_usage: dict[str, list[int]] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            record = read_json(path)
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict):
            continue
        if path.name in ("results.json", "summary.json"):
            usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
            usage = usage.get("this_invocation", usage)
            for entry in usage.values() if isinstance(usage, dict) else ():
                if isinstance(entry, dict):
                    _tally(from_usage, entry.get("model"), entry.get("reasoning_tokens"), entry.get("calls"))
            continue
        steps = list((record.get("steps") or {}).values())
        for evaluation in (record.get("evaluations") or {}).values():
            steps += list((evaluation.get("steps") or {}).values())
        for step in steps:
            if isinstance(step, dict) and isinstance(step.get("usage"), dict):
                _tally(from_steps, step.get("model"), step["usage"].get("reasoning_tokens"),
                       step.get("attempts") or 1)
    merged = {**from_usage, **from_steps}
    return {name: tokens / calls for name, (tokens, calls) in merged.items() if tokens > 0 and calls > 0}


def _tally(totals: dict[str, list[int]], model, tokens, calls) -> None:
    if isinstance(model, str) and isinstance(calls, int) and calls > 0:
        entry = totals.setdefault(model, [0, 0])
        entry[0] += tokens if isinstance(tokens, int) else 0
        entry[1] += calls


def parse_limits(specs: str | Iterable[str]) -> dict:
    """--rate_limit specs (or one) -> {model name or "*": UserLimits}; BadInput names a bad one."""
    from .models.pacing import parse_rate_limit

    try:
        return dict(parse_rate_limit(spec) for spec in ([specs] if isinstance(specs, str) else specs))
    except ValueError as exc:
        raise BadInput(f"rate_limit: {exc}") from None


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
            "reasoning_tokens": forecast.reasoning_tokens, "reasoning_basis": forecast.reasoning_basis,
            "cost_usd": forecast.cost(False), "batch_cost_usd": forecast.cost(True),
            "priced": forecast.cost(False) is not None, "batchable": forecast.batchable,
            "time_s": seconds, "in_process": forecast.in_process,
            "by_step": {step: {"calls": c, "input_tokens": i, "output_tokens": o, "reasoning_tokens": r}
                        for step, (c, i, o, r) in forecast.by_step.items()},
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
    total = {**{key: sum(v[key] for v in values)
                for key in ("calls", "input_tokens", "output_tokens", "reasoning_tokens")},
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
    out = sys.stdout if out is None else out
    for line in header:
        print(line, file=out)
    rows = [("role", "model", "calls", "input tok", "output tok", "reasoning", "cost online",
             "cost --batch", "time at limits")]
    for role, v in [*result["roles"].items(), ("total", {**result["total"], "model": ""})]:
        rows.append((role, v["model"], f"{v['calls']:,}", f"{v['input_tokens']:,}",
                     f"{v['output_tokens']:,}", f"{v['reasoning_tokens']:,}", _money(v["cost_usd"]),
                     _money(v["batch_cost_usd"]), _duration(v["time_s"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))),
              file=out)
    unpriced = [f"{role} ({v['model']})" for role, v in result["roles"].items() if v["cost_usd"] is None]
    if unpriced:
        print(f"unpriced: {', '.join(unpriced)}: no price in its provider's dated table (CATALOG in utils/models/; a self-hosted "
              f"model costs its hardware); the total cost is then unknown", file=out)
    reasoning: dict[tuple[str, str], list[str]] = {}  # (model, basis) -> its roles
    for role, v in result["roles"].items():
        if v["reasoning_tokens"]:
            reasoning.setdefault((v["model"], v["reasoning_basis"]), []).append(role)
    if reasoning:
        print("reasoning: the tokens a model thinks before it answers, billed as output and counted "
              "in output tok; " + "; ".join(f"{', '.join(roles)} ({model}): {basis}"
                                            for (model, basis), roles in reasoning.items()), file=out)
    unknown = [v for v in result["roles"].values() if v["time_s"] is None]
    if any(not v.get("in_process") for v in unknown):
        print("time: unknown without --rate_limit [MODEL=]tpm=N,rpm=N (a run learns the provider's "
              "limits from its response headers, which a dry run does not ask for)", file=out)
    local = sorted({v["model"] for v in unknown if v.get("in_process")})
    if local:
        print(f"time: {', '.join(local)} answer{'s' * (len(local) == 1)} in this process, at this machine's speed "
              f"(no rate limit applies; the embedded model reads about 180 prompt tokens a second on 2 cores, "
              f"`python benchmarks/embedded_model_speed.py` measures it here)", file=out)
    for note in [f"how: {TOKEN_COUNTING}.", f"{rendered}, assuming:", *(f"  - {a}" for a in assumptions)]:
        print(note, file=out)
    if as_json:
        print(json.dumps(result, sort_keys=False), file=out)
