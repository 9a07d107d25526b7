"""``cupid-match-agreement`` (``python -m cupid.evaluation.match_agreement``): the matcher's
meta-evaluation (Appendix A.1), in two steps.

``page`` writes an annotation page (Figure 12) of preference-checklist pairs that the runs
under RESULTS_DIR matched; ``score`` reads the annotators' labels and writes
match_agreement.md and .json (docs/match_agreement.md: the page, the labels file, the
measures). Exit status 0, or 2 for bad input (one line names the file, row and field).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..utils.errors import CupidError


def build_parser() -> argparse.ArgumentParser:
    from ..utils.command_line import Parser, positive_int, program_name

    p = Parser(prog=program_name("python -m cupid.evaluation.match_agreement"), description=__doc__.split("\n\n")[0])
    steps = p.add_subparsers(dest="step", required=True)
    page = steps.add_parser("page", help="write an annotation page of pairs the runs matched")
    page.add_argument("results_dir", help="a results directory (searched for runs)")
    page.add_argument("--output", required=True, help="the HTML file to write")
    page.add_argument("--n_pairs", type=positive_int, default=240, help="pairs on the page (A.1: 240)")
    page.add_argument("--seed", type=int, default=0, help="which pairs are drawn")
    score = steps.add_parser("score", help="agreement of the annotators and of every scorer with their majority")
    score.add_argument("results_dir", help="a results directory (searched for runs)")
    score.add_argument("--labels", required=True, nargs="+", help="the annotators' files (.csv, .json, .jsonl)")
    score.add_argument("--output", default=None, help="where match_agreement.md and .json go (default RESULTS_DIR)")
    return p


def main(argv: list[str] | None = None) -> int:
    from .report import agreement
    from .report.annotation_page import sample_pairs, write_page
    from ..utils.command_line import print_error
    from ..utils.io import atomic_write_json, atomic_write_text

    args = build_parser().parse_args(argv)
    if not Path(args.results_dir).is_dir():
        print(f"error: {args.results_dir}: not a directory", file=sys.stderr)
        return 2
    try:
        if args.step == "page":
            pairs = sample_pairs(args.results_dir, args.n_pairs, args.seed)
            if not pairs:
                print(f"error: {args.results_dir}: no matched preference-checklist pair in its runs", file=sys.stderr)
                return 2
            print(f"wrote {write_page(pairs, args.output)} ({len(pairs)} pairs)")
            return 0
        result = agreement.agreement(args.labels, args.results_dir)
    except CupidError as exc:
        return print_error(exc)
    output = Path(args.output or args.results_dir)
    atomic_write_json(output / "match_agreement.json", result)
    text = agreement.markdown(result)
    atomic_write_text(output / "match_agreement.md", text)
    print(text)
    print(f"wrote {output / 'match_agreement.md'}\nwrote {output / 'match_agreement.json'}")
    return 0


def console() -> None:
    """The console script ``cupid-match-agreement``."""
    sys.exit(main())


if __name__ == "__main__":
    console()
