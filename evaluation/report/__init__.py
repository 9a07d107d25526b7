"""The report over a results directory (python -m evaluation.report RESULTS_DIR).

    results.py      the run directories read by store.py's file rules; per-instance outcomes
    statistics.py   bootstrap intervals, paired differences, correlation, binning
    analysis.py     the computation shared by tables, CSV and figures (class Analysis)
    format.py       numbers, intervals and tables as text
    tables.py       the markdown tables in the paper's layouts
    figure_data.py  what each figure shows;  figures.py  drawing it (matplotlib)
    gaps.py         what the results cannot show yet, and the command that would make it
    published.py    the paper's published numbers
    build.py        report.md and report.csv;  html_report.py  report.html
    payload.py      report.html's index and data chunks;  instance_data.py  the instances' data
    compare_data.py the compare view's paired differences;  export.py  the per-sample rows
    error_types.py  Table 2's draw and classification (--error_types);  error_table.py  Table 2
    strategy_comparison.py  the context strategies' section and figure (session recall, F1 and
                    judge score)
    figure10.py     Figure 10's matrix (cupid-self-enhancement)
    interaction_section.py  --task interaction's section and page;  interaction_measures.py  its
                    measures
    agreement.py    the matcher's meta-evaluation (cupid-match-agreement);
                    annotation_page.py  its Figure 12 annotation page
    command.py      the command line
"""
from .build import ReportFiles, build_report
from .command import main
from .format import CSV_COLUMNS

__all__ = ["CSV_COLUMNS", "ReportFiles", "build_report", "main"]
