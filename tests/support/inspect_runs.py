"""What the tests of inspect_tasks/ share: a skip (or, under CUPID_REQUIRE_INSPECT=1 as in CI,
a failure) when inspect_ai is not installed; a data set of six instances of three personas
whose answers tests/support/cupid_responder.py scripts; the same script as inspect's mockllm
model; the `inspect` command of this environment (or of CUPID_INSTALLED_BIN's installed copy);
and the request bodies in a form that compares two runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cupid_responder import CupidResponder, InstancePlan, make_row

LABELS = ("Fully Covered", "Partially Covered", "Not Covered")
CASES = "ABCDEF"
TYPES = ("consistent", "contrastive", "changing")


def require_inspect() -> None:
    """Skip the module without inspect_ai (the ``inspect`` extra), unless CI requires it."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        if os.environ.get("CUPID_REQUIRE_INSPECT") == "1":
            raise
        pytest.skip("inspect_ai is not installed (pip install -e '.[inspect]')", allow_module_level=True)


def clustered_plans() -> list[InstancePlan]:
    """Six instances, two per persona; checklists of 2 to 4 entries (so a pooled figure is not
    the mean of the instances'), labels and judge scores varying."""
    plans = []
    for n, case in enumerate(CASES):
        inferred = [f"Does the response follow point {k + 1} of case {case}?" for k in range(2 + n % 3)]
        truth = [f"Does the response honour requirement {k + 1} of case {case}?" for k in range(4 - n % 3)]
        plans.append(InstancePlan(
            request=f"Please draft the document for case {case}.",
            truth=f"For case {case}, the user wants requirement list {case} respected.",
            truth_checklist=truth,
            inferred=f"The user probably wants case {case} handled with care.",
            inferred_checklist=inferred,
            precision_labels=[LABELS[(n + k) % 3] for k in range(len(inferred))],
            recall_labels=[LABELS[(2 * n + k + 1) % 3] for k in range(len(truth))],
            judge_score=2 + n))
    return plans


def write_clustered_data(path: Path, plans: list[InstancePlan]) -> Path:
    """The plans as instances of personas p1, p2, p3; case F's sessions never hold its
    preference (the oracle setting skips it)."""
    rows = [make_row(f"p{n // 2 + 1}", TYPES[n % 3], plan, n_sessions=4,
                     relevant=() if n == 5 else (1 + n % 4,))
            for n, plan in enumerate(plans)]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


def scripted_model(responder: CupidResponder, name: str = "mockllm/model"):
    """inspect's mockllm model answering as ``responder`` answers the loopback server."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def outputs(messages, tools, tool_choice, config):
        request = {"system": messages[0].text if messages[0].role == "system" else "",
                   "messages": [{"role": m.role, "content": m.text} for m in messages if m.role != "system"]}
        output = ModelOutput.from_content(model="mockllm", content=responder(request))
        # Counted here as the loopback server counts (words): mockllm's own count would fetch
        # tiktoken's encoding from the internet.
        prompt, answer = sum(len(m.text.split()) for m in messages), len(output.completion.split())
        output.usage = ModelUsage(input_tokens=prompt, output_tokens=answer, total_tokens=prompt + answer)
        return output

    return get_model(name, custom_outputs=outputs)


def inspect_command() -> str:
    """The ``inspect`` script: the installed copy's under CUPID_INSTALLED_BIN, else this venv's."""
    installed = os.environ.get("CUPID_INSTALLED_BIN")
    return str(Path(installed or Path(sys.executable).parent) / "inspect")


def run_inspect(args: list[str], cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    """``inspect ARGS`` as a user types it; fails the test with its output when it fails."""
    proc = subprocess.run([inspect_command(), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def canonical(body: dict) -> str:
    """A request body as sorted JSON with an integral float written as an integer: inspect
    writes the temperature 0 as 0.0, one number in JSON; every other difference stays."""
    def number(value):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, dict):
            return {k: number(v) for k, v in value.items()}
        if isinstance(value, list):
            return [number(v) for v in value]
        return value
    return json.dumps(number(body), sort_keys=True, ensure_ascii=False)
