"""report.md, report.csv and the PNG figures of a results directory, assembled from the
tables and figure data."""
from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from cupid.evaluation.report.analysis import Analysis
from cupid.evaluation.report.error_table import add_csv_columns, case_rows, table2_section
from cupid.evaluation.report.export import write_samples
from cupid.evaluation.report.figure_data import (inference_generation_data, length_data, matcher_data,
                                           position_data, prf_bars_data, summaries_data)
from cupid.evaluation.report.figures import plotter, pyplot
from cupid.evaluation.report.format import (DEFAULT_MIN_BIN_SIZE, FLAG, PAPER_EVALUATOR, md_table, render_csv)
from cupid.evaluation.report.gaps import Gap, find_gaps, gaps_markdown
from cupid.evaluation.report.published import paper_model_name, scorer_kind
from cupid.evaluation.report.statistics import DEFAULT_N_BOOTSTRAP, one_blas_thread
from cupid.evaluation.report.strategies import strategies_figure_data, strategies_section
from cupid.evaluation.report.tables import (coverage_section, differences_section, generation_table,
                                      inference_table)
from cupid.utils.cycle_collection import paused_cycle_collection
from cupid.utils.io import atomic_write_text, clean_orphan_tmp


@dataclass
class ReportFiles:
    markdown: Path
    csv: Path
    figures: list[Path]
    analysis: Analysis | None = None
    gaps: list[Gap] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    exports: list[Path] = field(default_factory=list)   # error_types.csv and .jsonl, when there are cases
    # build_report(figures_later=True): call before reading the figures or report.md's
    # Figures section (it waits for the drawing and corrects report.md if none was drawn).
    finish_figures: Callable[[], None] = lambda: None
    # Written into report.md, report.csv and report.html: files of two builds side by side show it.
    build_id: str = ""


def new_build_id() -> str:
    """This build's id: its time and a random tail ("20261123T101500Z-3f9a1c")."""
    return f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def build_report(results_dir: str | Path, output_dir: str | Path | None = None, *,
                 n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int = 0,
                 n_length_bins: int = 5, min_bin_size: int = DEFAULT_MIN_BIN_SIZE,
                 figures: bool = True, figures_later: bool = False,
                 exclude_filtered: bool = False) -> ReportFiles:
    """report.md, report.csv and the figures. The figures are drawn in a child process;
    with ``figures_later`` this returns before they are done (report.md assumes they will
    be) and the caller calls ``finish_figures()`` before it reads them. ``exclude_filtered``:
    the numbers leave out the results read from a filtered or refused answer."""
    with one_blas_thread(), paused_cycle_collection():
        return _build_report(results_dir, output_dir, n_bootstrap=n_bootstrap, seed=seed,
                             n_length_bins=n_length_bins, min_bin_size=min_bin_size, figures=figures,
                             figures_later=figures_later, exclude_filtered=exclude_filtered)


def _build_report(results_dir: str | Path, output_dir: str | Path | None, *, n_bootstrap: int, seed: int,
                  n_length_bins: int, min_bin_size: int, figures: bool, figures_later: bool,
                  exclude_filtered: bool) -> ReportFiles:
    results_dir = Path(results_dir)
    output = Path(output_dir) if output_dir is not None else results_dir
    clean_orphan_tmp(output, recursive=False)  # a killed build's half-written report files
    drawing = _FigureDrawing(figures)
    try:
        # The report never shows the raw answer of a step done at its first attempt.
        an = Analysis(results_dir, n_bootstrap=n_bootstrap, seed=seed, n_length_bins=n_length_bins,
                      min_bin_size=min_bin_size, keep_raw=False, exclude_filtered=exclude_filtered)
        if not an.runs:
            notes = f" ({'; '.join(an.ignored)})" if an.ignored else ""
            raise FileNotFoundError(f"{results_dir}: no evaluation run directories (no run.json of an "
                                    f"evaluation run found){notes}")
        gaps = find_gaps(an, results_dir)
        output.mkdir(parents=True, exist_ok=True)
        figure_data = [prf_bars_data(an), position_data(an), length_data(an), *matcher_data(an),
                       inference_generation_data(an), summaries_data(an), strategies_figure_data(an)]
        drawing.send([(data, output / f"{data.name}.png") for data in figure_data if not data.skipped]
                     if figures else [])
        files = _write_report(an, gaps, figure_data, drawing, results_dir, output, n_bootstrap=n_bootstrap,
                              seed=seed, figures=figures, figures_later=figures_later)
    except BaseException:
        drawing.close()
        raise
    if not figures_later:
        files.finish_figures()
    return files


def _write_report(an: Analysis, gaps: list[Gap], figure_data: list, drawing: "_FigureDrawing", results_dir: Path,
                  output: Path, *, n_bootstrap: int, seed: int, figures: bool, figures_later: bool) -> ReportFiles:
    build_id = new_build_id()
    md = ["# CUPID evaluation report", "",
          f"Results: `{results_dir}` · generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} · "
          f"build `{build_id}` (report.csv and report.html of this build name it too)",
          "",
          f"All numbers are recomputed from the per-instance files. Inference P/R/F1 are percentages; "
          f"**micro** pools the match sums and checklist sizes over instances (as the released "
          f"results.json), **macro** averages per-instance scores (the paper's §2.3 formula). Brackets "
          f"are 95% percentile bootstrap intervals clustered by persona ({n_bootstrap} resamples, seed {seed}): each "
          f"resample draws personas, with all their instances, since a persona's three instances share its "
          f"sessions and are not independent draws (resampling instances would give intervals up to √3 too narrow). "
          f"`n` = evaluated instances / instances that apply (see Coverage). Rows `↳ paper` hold the published numbers "
          f"(only for the exact model versions of the paper's Table 8; the paper used 756 instances and "
          f"{PAPER_EVALUATOR} as evaluator; the label says so when ours differs). The paper reports its inference "
          f"numbers \"averaged across all instances\" without saying micro or macro, so its row stands under both. "
          f"{FLAG} k in an `n` cell: k of the results were read from an answer the provider filtered or the model "
          f"refused (see Coverage); "
          + ("they are **left out** of every number (`--exclude_filtered`)." if an.exclude_filtered
             else "they are included, as the release would score them; `--exclude_filtered` leaves them out."), ""]

    md += ["## Runs", ""]
    md.append(md_table(["Model", "Paper name", "Setting", "Instance files", "Scorers", "Tasks", "Directory"],
                        [[r.model, paper_model_name(r.model) or "—", r.setting, str(len(r.instances)),
                          ", ".join(f"`{s}`" for s in r.scorers) or "—", ", ".join(sorted(r.tasks)) or "—",
                          "; ".join(str(d.relative_to(results_dir)) if d != results_dir else "."
                                    for d in r.directories)]
                         for m in an.models() for r in an.runs if r.model == m]))
    md += ["", coverage_section(an), "", gaps_markdown(gaps, an.ignored), ""]

    md += ["## Inference", ""]
    for scorer in an.scorers("inference"):
        _, matcher = an.scorer_parts(scorer)
        kind = scorer_kind(scorer, matcher)
        main = "Table 11" if kind == "prefmatcher" else "Table 1"
        for layout, title in (("main", f"{main} layout"), ("summary", "Table 9 layout (summary setting)")):
            if layout == "summary" and "+" in scorer:
                title = "Summary setting"
            for avg in ("micro", "macro"):
                table = inference_table(an, scorer, layout, avg)
                if table:
                    md += [f"### {title} — scorer `{scorer}`, {avg}", "", table, ""]
    table2 = table2_section(an)
    if table2:
        md += [table2, ""]
    md += ["## Generation", ""]
    gen_scorers = an.scorers("generation")
    for scorer in gen_scorers:
        if "+" in scorer and scorer.partition("+")[0] in gen_scorers:
            continue  # the same judge as the evaluator's own scorer
        for layout, title in (("main", "Table 3 layout"), ("summary", "Table 10 layout (summary setting)")):
            table = generation_table(an, scorer, layout)
            if table:
                md += [f"### {title} — judge `{scorer}`", "", table, ""]

    strategies = strategies_section(an)
    if strategies:
        md += [strategies, ""]
    md += [differences_section(an), ""]

    def figures_section(plot_error: str | None) -> tuple[list[str], list[Path]]:
        lines, written = ["## Figures", ""], []
        if plot_error:
            lines += [plot_error, ""]
        for data in figure_data:
            lines += [f"### {data.title}", ""]
            if data.skipped:
                lines += [f"Not drawn: {data.skipped}.", ""]
                continue
            if figures and not plot_error:
                path = output / f"{data.name}.png"
                written.append(path)
                lines += [f"![{data.title}]({path.name})", ""]
            lines += [data.caption, ""]
            if data.table:
                lines += [data.table, ""]
        return lines, written

    md_path, csv_path = output / "report.md", output / "report.csv"
    csv_rows = an.csv_rows()
    add_csv_columns(an, csv_rows)
    atomic_write_text(csv_path, render_csv(csv_rows, build_id))
    cases = case_rows(an)
    exports = [write_samples(cases, output / f"error_types.{kind}") for kind in ("csv", "jsonl")] if cases else []
    # Written when the figures are done (or assuming they will be, figures_later).
    lines, written = figures_section(None if figures_later or not figures else drawing.wait())
    atomic_write_text(md_path, "\n".join(md + lines).rstrip() + "\n")
    files = ReportFiles(md_path, csv_path, written, an, gaps, an.ignored, exports, build_id=build_id)

    finished: list[bool] = []

    def finish_figures() -> None:
        if finished:
            return
        finished.append(True)
        plot_error = drawing.wait()
        if plot_error:  # matplotlib is missing: report.md says so instead
            lines, files.figures[:] = figures_section(plot_error)
            atomic_write_text(md_path, "\n".join(md + lines).rstrip() + "\n")

    files.finish_figures = finish_figures if figures_later else drawing.close
    return files


class _FigureDrawing:
    """Draws the PNG figures in a child process while the parent computes the tables
    (matplotlib's import and drawing hold the GIL: ~1.5 s of a paper-scale report); inline
    where fork is not available.

    The child is forked at the start, before the results are read, and imports matplotlib
    while the parent reads them; ``send(jobs)`` hands it the figures' data (pickled, through
    a pipe). A child forked later would share the parent's whole heap, and as the parent
    goes on touching its objects the pages are copied: ~200 MB more at paper scale.
    ``wait()`` returns None once every figure is written, or the line report.md shows when
    matplotlib is not installed."""

    def __init__(self, enabled: bool):
        self.jobs: list[tuple[Any, Path]] = []
        self.pid: int | None = None
        self.result_fd: int | None = None
        self.jobs_fd: int | None = None
        self._sender: threading.Thread | None = None
        if enabled and hasattr(os, "fork"):
            result_read, result_write = os.pipe()
            jobs_read, jobs_write = os.pipe()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child: draw, say how it went, and leave without cleanup
                status = 1
                try:
                    os.close(result_read)
                    os.close(jobs_write)
                    message = self._serve(jobs_read)
                    os.write(result_write, message.encode("utf-8"))
                    status = 0
                finally:
                    os._exit(status)
            os.close(result_write)
            os.close(jobs_read)
            self.pid, self.result_fd, self.jobs_fd = pid, result_read, jobs_write

    def _serve(self, jobs_fd: int) -> str:
        try:
            pyplot()
        except ImportError as exc:
            return f"figures not drawn: matplotlib is not installed ({exc})"
        with os.fdopen(jobs_fd, "rb") as pipe:
            data = pipe.read()
        if data:
            self.jobs = pickle.loads(data)
            return self._draw() or ""
        return ""

    def send(self, jobs: list[tuple[Any, Path]]) -> None:
        """The figures to draw: their data and paths (written by a thread, so the parent
        does not wait for the child to finish importing matplotlib)."""
        self.jobs = jobs
        if self.jobs_fd is None:
            return
        data, fd = pickle.dumps(jobs) if jobs else b"", self.jobs_fd
        self.jobs_fd = None

        def write() -> None:
            # A broken pipe: the child stopped at matplotlib's import, and wait() returns
            # its line for report.md.
            with contextlib.suppress(BrokenPipeError), os.fdopen(fd, "wb") as pipe:
                pipe.write(data)

        self._sender = threading.Thread(target=write, name="figure-jobs", daemon=True)
        self._sender.start()

    def _draw(self) -> str | None:
        try:
            pyplot()
        except ImportError as exc:
            return f"figures not drawn: matplotlib is not installed ({exc})"
        for data, path in self.jobs:
            plotter(data.name)(data, path)
        return None

    def _end_jobs(self) -> None:
        if self.jobs_fd is not None:  # no jobs were sent: the child reads none
            os.close(self.jobs_fd)
            self.jobs_fd = None
        if self._sender is not None:
            self._sender.join()
            self._sender = None

    def close(self) -> None:
        """Reap the child if ``wait`` was not reached (the tables failed)."""
        if self.pid is not None:
            self._end_jobs()
            os.close(self.result_fd)
            os.waitpid(self.pid, 0)
            self.pid = None

    def wait(self) -> str | None:
        if self.pid is None:
            return self._draw() if self.jobs else None
        self._end_jobs()
        with os.fdopen(self.result_fd, "rb") as pipe:
            message = pipe.read().decode("utf-8")
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if os.waitstatus_to_exitcode(status) != 0:
            return self._draw()  # the child failed: draw here, so the error is the real one
        return message or None
