"""--revision: a local data path refuses it, and the report reads the data at the commit the
run recorded. Loading a revision from the hub, through the real libraries against a local
hub, is tests/evaluation/test_hub_loading.py's."""
from __future__ import annotations


from cupid.evaluation import run as run_module
from cupid.evaluation.report.instance_data import _source_specs
from cupid.evaluation.report.results import Run


def test_revision_with_local_data_is_refused(tmp_path, capsys):
    code = run_module.main(["--model", "smollm2-135m", "--data_dir", "data/sample",
                            "--revision", "0123abc", "--results_dir", str(tmp_path / "r")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: revision: ") and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_the_report_reads_the_revision_the_run_used(tmp_path):
    run = Run(model="m", setting="default", manifests=[
        {"data_source": "kixlab/CUPID[test]",
         "data": {"dataset": "kixlab/CUPID", "split": "test", "revision": "0123abc"}}])
    specs, notes = _source_specs([run], None, tmp_path)
    assert specs == [{"dataset": "kixlab/CUPID", "split": "test", "revision": "0123abc"}]
    assert notes == []
    # The commit the run read wins over the revision it asked (a branch moves on).
    commit = "0123abc" + "0" * 33
    run.manifests[0]["data"].update(revision="main", commit=commit)
    assert _source_specs([run], None, tmp_path)[0][0]["revision"] == commit
