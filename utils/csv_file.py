"""The one rule by which the project writes CSV: report.csv, ``cupid-report --export`` and
error_types.csv here; the matcher page's labels CSV in utils/templates/annotate.js, which
takes ``INERT_STARTS`` from the page (evaluation/report/annotation_page.py).

Spreadsheets run a cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage
return before one) as a formula: a model's answer or a model's name reading
``=HYPERLINK(...)`` would. Such a text cell is written with a leading ``'`` (OWASP, "CSV
Injection"), which a spreadsheet takes as the mark of a text and does not show; so is a text
that starts with ``'`` itself, so that ``read_cell`` gives back exactly the text written.
Numbers stay numbers; lists and objects are JSON text. Records end with CRLF (RFC 4180): a
cell holding a line break, a lone CR included, is quoted.
"""
from __future__ import annotations

import csv
import io
import json
from typing import Any, Iterable

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"
INERT_STARTS = FORMULA_STARTS + (TEXT_MARK,)


def inert_cell(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula (or one starting with the mark),
    prefixed with ``'``; any other value as it is."""
    return TEXT_MARK + value if isinstance(value, str) and value.startswith(INERT_STARTS) else value


def read_cell(text: str) -> str:
    """The text ``inert_cell`` was given, from the cell it wrote."""
    return text[1:] if text.startswith(TEXT_MARK) and text[1:].startswith(INERT_STARTS) else text


def csv_text(columns: Iterable[str], rows: Iterable[dict]) -> str:
    """The rows as CSV under ``columns`` (a missing value or None is an empty cell), every
    cell by ``inert_cell``."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: inert_cell(json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v)
                         for k, v in row.items()})
    return buffer.getvalue()
