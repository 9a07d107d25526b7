"""--revision: the hub dataset's version reaches the hub library, the run's manifest and
the report's reading of the data; a local data path refuses it. The hub library's
``load_dataset`` is replaced by a recorder (nothing here reaches the internet)."""
from __future__ import annotations

import pytest

import datasets
from cupid_responder import make_row, two_instance_plans
from cupid.evaluation import run as run_module
from cupid.evaluation.data import InstanceSource
from cupid.evaluation.report.instance_data import _source_specs
from cupid.evaluation.report.results import Run
from cupid.utils.dataset import DataValidationError


@pytest.fixture
def hub(monkeypatch):
    """``datasets.load_dataset`` answering two rows and recording every call's arguments."""
    plans = two_instance_plans()
    rows = [make_row("p1", "consistent", plans[0], n_sessions=8),
            make_row("p2", "consistent", plans[1], n_sessions=8)]
    calls: list[dict] = []

    def load_dataset(path, **kwargs):
        calls.append({"path": path, **kwargs})
        if kwargs.get("revision") == "no-such-revision":
            raise ValueError("Revision 'no-such-revision' does not exist for dataset")
        return list(rows)

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no reachability probe
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_the_revision_reaches_the_hub_library_and_the_manifest(hub):
    source = InstanceSource(dataset="kixlab/CUPID", split="test", revision="0123abc")
    assert source.validate() == 2
    assert [i.instance_id for i in source] == ["p1__consistent", "p2__consistent"]
    assert hub and all(call == {"path": "kixlab/CUPID", "split": "test", "revision": "0123abc"}
                       for call in hub)
    described = source.describe()
    assert described["revision"] == "0123abc" and described["dataset"] == "kixlab/CUPID"
    # The run directory's name of the data is the same whatever the revision: shards and
    # resumed runs share it, and the fingerprint tells different data apart.
    assert source.name == "kixlab/CUPID[test]"


def test_without_a_revision_the_hub_default_is_asked_and_nothing_is_added(hub):
    source = InstanceSource(dataset="kixlab/CUPID", split="test")
    source.validate()
    assert hub[0]["revision"] is None
    assert "revision" not in source.describe()  # manifests of unpinned runs stay as they were


def test_an_unknown_revision_is_named(hub):
    source = InstanceSource(dataset="kixlab/CUPID", split="test", revision="no-such-revision")
    with pytest.raises(DataValidationError, match="no revision 'no-such-revision'.*--revision"):
        source.validate()


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
