"""How deep a model call sits: the project's frames on the stack when a user's
``Model.__call__`` is asked through ``evaluate()``, and which they are. (Issue target: at
most 9.) Offline: the model is a class of this script's, the data the bundled sample.

    python benchmarks/model_frames.py
"""
from __future__ import annotations

import inspect
import os
import tempfile

from cupid import config
from cupid.evaluation import evaluate
from cupid.utils.models import Model

ROOT = os.path.realpath(config.ROOT) + os.sep
stacks: list[list[tuple[str, str]]] = []


class Probe(Model):
    """Records the project's frames above each call; answers every step well enough."""

    def __call__(self, system_prompt: str, user_prompt: str) -> str:
        frames = [f for f in inspect.stack()[1:] if os.path.realpath(f.filename).startswith(ROOT)]
        stacks.append([(os.path.relpath(f.filename, ROOT), f.function) for f in frames])
        if "Most Likely Preference" in system_prompt + user_prompt:
            return "### Analysis\n\nx\n\n### Most Likely Preference\n\nShort answers."
        if "Evaluation Score" in system_prompt + user_prompt:
            return "### Evaluation Label\n\nGood\n\n### Evaluation Score\n\n7"
        return ('```json\n{"checklist": ["Is it short?"], "results": '
                '[{"index": 1, "entry": "x", "label": "Fully Covered"}]}\n```')


def main() -> None:
    with tempfile.TemporaryDirectory() as results_dir:
        evaluate(Probe("probe"), evaluator=Probe("probe-evaluator"), data=str(config.SAMPLE_DATA_DIR),
                 task="both", limit=2, results_dir=results_dir, n_workers=2)
    deepest = max(stacks, key=len)
    print(f"calls: {len(stacks)}; project frames above Model.__call__: at most {len(deepest)}, "
          f"at least {min(map(len, stacks))}")
    for path, function in deepest:
        print(f"  {path}:{function}")


if __name__ == "__main__":
    main()
