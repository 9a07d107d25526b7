"""One set of counts everywhere: results.json's ``counts`` and ``by_task``, its metric
blocks, run.json's record of the invocation and the console summary must agree."""
from __future__ import annotations

import json
import re
from pathlib import Path

from cupid.evaluation.store import is_instance_file


def assert_counts_agree(run_dir: Path, console: str | None = None) -> dict:
    results = json.loads((run_dir / "results.json").read_text())
    manifest = json.loads((run_dir / "run.json").read_text())
    c = results["counts"]
    n_files = sum(is_instance_file(p) for p in run_dir.glob("*.json"))
    assert c["instances"] == n_files
    assert c["instances"] == c["evaluated"] + c["failed"] + c["skipped"] + c.get("unfinished", 0)
    blocks = {"inference": results.get("inference_n_instances"),
              "generation": (results.get("generation") or {}).get("n_instances")}
    for task, counted in c["by_task"].items():
        assert counted["done"] == blocks[task], (task, counted, blocks)
        assert counted["done"] + counted["failed"] <= c["instances"]
        assert counted["done"] >= c["evaluated"]  # an evaluated instance has every task
    failed_by_step = sum(sum(r.values()) for r in c["failures_by_step"].values())
    assert (failed_by_step > 0) == (c["failed"] > 0)
    this = results["this_invocation"]
    assert manifest["invocations"][-1] == this
    assert this["found_done"] + this["ran"] + this["in_progress_elsewhere"] <= this["instances"]
    assert this["ran_failed"] <= this["ran"]
    if console is not None:
        line = re.search(r"instances in the run directory: (\d+) · evaluated (\d+) · FAILED (\d+) "
                         r"· skipped (\d+)", console)
        assert line, console
        assert [int(x) for x in line.groups()] == [c["instances"], c["evaluated"], c["failed"],
                                                   c["skipped"]]
        line = re.search(r"this invocation: found done (\d+) · ran (\d+) \((\d+) failed\) · "
                         r"remaining (\d+)", console)
        assert line, console
        assert [int(x) for x in line.groups()] == [this["found_done"], this["ran"],
                                                   this["ran_failed"], this["remaining"]]
    return results
