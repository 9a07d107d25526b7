"""The Python API as a researcher meets it: a Jupyter notebook (a real ipykernel, run by
nbclient) in a research directory that holds its own ``config.py``, ``utils/`` and
``evaluation/``. Its modules stay its own; ours are ``cupid.*``; ``evaluate()`` runs there on a
model the notebook defines, and the model file's own ``utils`` import works."""
from __future__ import annotations

import json

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat (pip install -e '.[dev]')")
nbclient = pytest.importorskip("nbclient", reason="the notebook test needs nbclient (pip install -e '.[dev]')")

from repo_paths import SAMPLE_DATA  # noqa: E402

CELLS = [
    # The research directory's own modules, imported first, as a notebook would.
    "import json, config, utils.helpers, evaluation\n"
    "assert config.SEED == 7 and evaluation.MINE and utils.helpers.double(2) == 4",
    "from cupid.evaluation import evaluate\n"
    "from cupid.utils.models import Model\n"
    "import cupid.config\n"
    "assert cupid.config is not config and config.SEED == 7",
    "class Scripted(Model):\n"
    "    def __call__(self, system_prompt, user_prompt):\n"
    "        text = system_prompt + user_prompt\n"
    "        if 'Most Likely Preference' in text:\n"
    "            return '### Analysis\\n\\nx\\n\\n### Most Likely Preference\\n\\nShort answers.'\n"
    "        if 'Evaluation Score' in text:\n"
    "            return '### Evaluation Label\\n\\nGood\\n\\n### Evaluation Score\\n\\n7'\n"
    "        if '#### Checklist' in user_prompt:  # the matcher: every numbered entry covered\n"
    "            n = user_prompt.rsplit('#### Checklist', 1)[1].count('\\n') - 1\n"
    "            return json.dumps({'results': [{'index': i, 'entry': 'x', 'label': 'Fully Covered'}\n"
    "                                           for i in range(1, n + 1)]})\n"
    "        return '{\"checklist\": [\"Is it short?\"]}'",
    "run = evaluate(Scripted('scripted'), evaluator=Scripted('judge'), data=DATA, task='both', limit=2,\n"
    "               results_dir='results', n_workers=2)\n"
    "print(run.failed, run.results['generation']['average_score'], len(run.to_pandas()))",
    # A model file of the user's that imports its own utils, named on the command line's way.
    "run = evaluate('my_model.py:Echo', evaluator=Scripted('judge'), data=DATA, limit=1,\n"
    "               results_dir='results')\n"
    "print(run.results['counts']['evaluated'])",
]


def test_a_notebook_in_a_research_directory(tmp_path):
    work = tmp_path / "research"
    (work / "utils").mkdir(parents=True)
    (work / "evaluation").mkdir()
    (work / "config.py").write_text("SEED = 7\n")
    (work / "utils" / "__init__.py").write_text("")
    (work / "utils" / "helpers.py").write_text("def double(x):\n    return 2 * x\n")
    (work / "evaluation" / "__init__.py").write_text("MINE = True\n")
    (work / "my_model.py").write_text(
        "from utils.helpers import double\n"
        "from cupid.utils.models import Model\n\n"
        "class Echo(Model):\n"
        "    def __call__(self, system_prompt, user_prompt):\n"
        "        assert double(1) == 2\n"
        "        return '### Analysis\\n\\nx\\n\\n### Most Likely Preference\\n\\nShort answers.'\n")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(f"DATA = {json.dumps(str(SAMPLE_DATA))}")] + \
        [nbformat.v4.new_code_cell(source) for source in CELLS]
    nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(work)}}).execute()
    printed = ["".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
               for cell in notebook.cells]
    failed, score, rows = printed[4].split()
    assert (failed, float(score), rows) == ("0", 7.0, "2")
    assert printed[5].strip() == "1"  # the model file imported the research directory's utils
    assert (work / "results" / "scripted" / "results.json").is_file()
