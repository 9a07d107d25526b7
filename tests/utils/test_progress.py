"""Progress off a terminal: every long command says how far it is in lines at a bounded
interval (the synthesis per stage, resumed work named as found done; the validation per
instance), and a bar's figures are those of the instances finished, not one behind."""
from __future__ import annotations

import re

from cupid.synthesis import scheduler
from cupid.synthesis.pipeline import SynthesisConfig, run_synthesis
from cupid.utils import executor
from synthesis_responder import ScriptedSynthesis


def config(server, out) -> SynthesisConfig:
    url = server.openai_base_url
    return SynthesisConfig(output_dir=out, n_personas=1, persona_seeds="bundled", n_workers=2, show_progress=None,
                           model=f"vllm:s@{url}", user_model=f"vllm:u@{url}", assistant_model=f"vllm:a@{url}",
                           decomposer_model=f"vllm:d@{url}")


def test_synthesis_off_a_terminal_prints_stage_lines_and_names_resumed_work(fake_server, tmp_path, capsys,
                                                                            monkeypatch):
    monkeypatch.setattr(scheduler, "HEARTBEAT_S", 0.3)
    fake_server.responder = ScriptedSynthesis()
    fake_server.latency = 0.05
    run_synthesis(config(fake_server, tmp_path / "out"))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress synthesis:")]
    assert len(lines) >= 2  # at least one on the way, and the last
    assert re.search(r"dialogues 12/12, instances 1/1, [\d.]+ tasks/min, elapsed 0:00:\d\d", lines[-1]), lines[-1]

    run_synthesis(config(fake_server, tmp_path / "out"))  # a rerun: everything found on disk
    last = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress synthesis:")][-1]
    assert "dialogues 0/0 (12 found done)" in last and "instances 1/1 (3 found done)" in last


def test_a_terminals_bar_shows_the_figures_of_the_instances_finished(monkeypatch):
    shown = []

    class Bar:
        def __init__(self, **kwargs):
            pass

        def update(self, n):
            pass

        def set_postfix(self, values, refresh=True):
            shown.append(dict(values))

        def close(self):
            pass

    import tqdm.auto
    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    finished: list[int] = []
    for item, result in executor.iter_with_progress(lambda x: x * 10, [1, 2, 3], n_workers=1, show=True,
                                                    postfix=lambda: {"n": len(finished), "sum": sum(finished)}):
        finished.append(result)
    assert shown[-1] == {"n": 3, "sum": 60}
