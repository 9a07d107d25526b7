"""report.md, report.csv and the PNG figures of a results directory, assembled from the
tables and figure data."""
from __future__ import annotations

import multiprocessing
import secrets
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import interaction_section
from .analysis import Analysis
from .error_table import add_csv_columns, case_rows, table2_section
from .export import write_samples
from .figure_data import (inference_generation_data, length_data, matcher_data,
                          position_data, prf_bars_data, summaries_data)
from .figures import plotter, pyplot
from .format import (DEFAULT_MIN_BIN_SIZE, FLAG, PAPER_EVALUATOR, md_table, render_csv)
from .gaps import Gap, find_gaps, gaps_markdown
from .html_report import write_html_report
from .published import paper_model_name, scorer_kind
from .statistics import DEFAULT_N_BOOTSTRAP, one_blas_thread
from .strategy_comparison import memory_cost_section, strategies_figure_data, strategies_section
from .tables import (coverage_section, differences_section, generation_table,
                     inference_table)
from ...utils.cycle_collection import paused_cycle_collection
from ...utils.io import atomic_write_text, clean_orphan_tmp


@dataclass
class ReportFiles:
    markdown: Path
    csv: Path | None      # None: interactive runs only
    figures: list[Path]
    analysis: Analysis
    gaps: list[Gap]
    exports: list[Path]   # error_types.csv and .jsonl, when there are cases
    # Written into report.md, report.csv and report.html: files of two builds side by side show it.
    build_id: str
    html: Path | None


def build_report(results_dir: str | Path, output_dir: str | Path | None = None, *,
                 n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int = 0,
                 n_length_bins: int = 5, min_bin_size: int = DEFAULT_MIN_BIN_SIZE,
                 figures: bool = True, html: bool = False, data_paths: list[str | Path] | None = None,
                 exclude_filtered: bool = False) -> ReportFiles:
    """report.md, report.csv, the figures and (``html``) report.html, its sessions and ground
    truth read from ``data_paths`` or the runs' data sources. ``exclude_filtered``: the numbers
    leave out the results read from a filtered or refused answer."""
    with one_blas_thread(), paused_cycle_collection(), _drawer(figures) as drawer:
        # The drawer is forked now, while the heap is small, and imports matplotlib while the
        # results are read.
        importing = drawer.submit(_import_matplotlib) if figures else None
        results_dir = Path(results_dir)
        output = Path(output_dir) if output_dir is not None else results_dir
        clean_orphan_tmp(output, recursive=False)  # a killed build's half-written report files
        # The report never shows the raw answer of a step done at its first attempt.
        an = Analysis(results_dir, n_bootstrap=n_bootstrap, seed=seed, n_length_bins=n_length_bins,
                      min_bin_size=min_bin_size, keep_raw=False, exclude_filtered=exclude_filtered)
        interactive = interaction_section.find_runs(results_dir, n_bootstrap, seed)
        if not an.runs and not interactive:
            notes = f" ({'; '.join(an.ignored)})" if an.ignored else ""
            raise FileNotFoundError(f"{results_dir}: no evaluation run directories (no run.json of an "
                                    f"evaluation run found){notes}")
        if not an.runs:  # interactive runs only: their section and page
            output.mkdir(parents=True, exist_ok=True)
            md_path = output / "report.md"
            drawn = interaction_section.write_figure(interactive, output) if figures else None
            atomic_write_text(md_path, f"# CUPID evaluation report\n\nResults: `{results_dir}`\n\n"
                                       + interaction_section.section(interactive, results_dir, drawn) + "\n")
            page = interaction_section.write_page(interactive, output, data_paths) if html else None
            return ReportFiles(md_path, None, [drawn] if drawn else [], an, [], [], "", page)
        gaps = find_gaps(an, results_dir)
        output.mkdir(parents=True, exist_ok=True)
        # Its time and a random tail ("20261123T101500Z-3f9a1c").
        build_id = f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
        md = _markdown(an, gaps, results_dir, build_id)
        figure_lines, written, drawing = _figures(an, output, drawer, importing)
        md_path, csv_path = output / "report.md", output / "report.csv"
        csv_rows = an.csv_rows()
        add_csv_columns(an, csv_rows)
        atomic_write_text(csv_path, render_csv(csv_rows, build_id))
        cases = case_rows(an)
        exports = [write_samples(cases, output / f"error_types.{kind}") for kind in ("csv", "jsonl")] if cases else []
        if interactive:
            drawn = interaction_section.write_figure(interactive, output) if figures else None
            written += [drawn] if drawn else []
            md += [interaction_section.section(interactive, results_dir, drawn), ""]
        atomic_write_text(md_path, "\n".join(md + figure_lines).rstrip() + "\n")
        if interactive and html:
            interaction_section.write_page(interactive, output, data_paths)
        page = write_html_report(an, output, data_paths=data_paths, build_id=build_id,
                                 drawing=drawing) if html else None
        for future in drawing:  # raises what failed in the drawing
            future.result()
        return ReportFiles(md_path, csv_path, written, an, gaps, exports, build_id, page)


def _drawer(draw: bool) -> Executor:
    """Where the figures are drawn: in a forked process, since drawing holds the GIL (~3 s at
    paper scale, which a thread would not overlap with report.html's data); on a thread where
    fork is missing."""
    if draw and "fork" in multiprocessing.get_all_start_methods():
        return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    return ThreadPoolExecutor(1)


def _import_matplotlib() -> None:
    pyplot()


def _figures(an: Analysis, output: Path, drawer: Executor,
             importing: Future | None) -> tuple[list[str], list[Path], list[Future]]:
    """report.md's Figures section, and the PNGs handed to ``drawer`` (none without
    matplotlib, or when ``importing`` it was not asked) with their drawing."""
    lines, written, drawing = ["## Figures", ""], [], []
    try:
        draw = importing is not None and importing.result() is None
    except ImportError as exc:
        draw, lines = False, lines + [f"figures not drawn: matplotlib is not installed ({exc})", ""]
    for data in (prf_bars_data(an), position_data(an), length_data(an), *matcher_data(an),
                 inference_generation_data(an), summaries_data(an), strategies_figure_data(an)):
        lines += [f"### {data.title}", ""]
        if data.skipped:
            lines += [f"Not drawn: {data.skipped}.", ""]
            continue
        if draw:
            path = output / f"{data.name}.png"
            drawing.append(drawer.submit(plotter(data.name), data, path))
            written.append(path)
            lines += [f"![{data.title}]({path.name})", ""]
        lines += [data.caption, ""]
        if data.table:
            lines += [data.table, ""]
    return lines, written, drawing


def _markdown(an: Analysis, gaps: list[Gap], results_dir: Path, build_id: str) -> list[str]:
    """report.md's lines up to its figures."""
    md = ["# CUPID evaluation report", "",
          f"Results: `{results_dir}` · generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} · "
          f"build `{build_id}` (report.csv and report.html of this build name it too)",
          "",
          f"All numbers are recomputed from the per-instance files. Inference P/R/F1 are percentages; "
          f"**micro** pools the match sums and checklist sizes over instances (as the released "
          f"results.json), **macro** averages per-instance scores (the paper's §2.3 formula). Brackets "
          f"are 95% percentile bootstrap intervals clustered by persona ({an.n_bootstrap} resamples, seed "
          f"{an.seed}): each resample draws personas, with all their instances, since a persona's three instances "
          f"share its sessions and are not independent draws (resampling instances would give intervals up to √3 too "
          f"narrow). "
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
    memory = memory_cost_section(an)
    if memory:
        md += [memory, ""]
    md += [differences_section(an), ""]
    return md
