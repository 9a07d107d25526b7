"""``cupid-self-enhancement`` (``python -m cupid.studies.self_enhancement``): the paper's
check for self-enhancement bias (§F.5, Figure 10). Each model synthesizes a small data set on
the same personas, every model is evaluated on every data set, and the matrix of inference F1
and judge score frames the cells where a model meets data of its own family.

It composes the two engines and nothing else: ``synthesize()``, ``evaluate()`` with
``task="both"``, then the matrix (evaluation/report/figure10.py). Both engines resume,
so the same command run again continues where it stopped; docs/self_enhancement.md says where
each part goes and what ``--dry_run`` prices. Exit status: 0, 1 when a persona or an instance
failed (rerun to retry it), 2 bad input or setup, 3 a refused write, 130/143/129 stopped.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import config
from ..utils.dataset import safe_name
from ..utils.command_line import print_error
from ..utils.errors import BadInput, CupidError, Interrupted
from ..utils.io import atomic_write_json, read_json
from ..utils.redact import redact
from ..utils.stop_signals import SignalGuard, stop_cause, stop_status

PERSONAS_FILE = "personas.json"


# ---------------------------------------------------------------------------------------
# Which personas, and their profiles
# ---------------------------------------------------------------------------------------
def worst_personas(results_dir: str | Path, n: int) -> list[dict]:
    """The ``n`` personas with the lowest mean per-instance F1 over every model's
    default-setting run under ``results_dir`` (the primary scorer; §F.5 took the 64 with the
    lowest average performance across all models), lowest first, ties by persona id."""
    from ..evaluation.report.analysis import Analysis
    from ..evaluation.report.statistics import instance_prf

    an = Analysis(results_dir, n_bootstrap=1, keep_raw=False)
    scorer = an.primary_scorer("inference")
    f1s: dict[str, list[float]] = {}
    for run in an.runs:
        if run.setting != "default" or scorer not in run.scorers or not run.has_task("inference", scorer):
            continue
        for instance_id, counts in an.outcome(run, scorer, "inference").values.items():
            f1s.setdefault(str(run.persona(instance_id)), []).append(instance_prf(counts)[2])
    if not f1s:
        raise BadInput(f"from_results: {results_dir}: no default-setting inference results to rank personas by")
    means = sorted((sum(v) / len(v), pid, len(v)) for pid, v in f1s.items())
    return [{"persona_id": pid, "mean_f1": round(mean, 6), "results": k} for mean, pid, k in means[:n]]


def read_profiles(path: str | Path) -> dict[str, dict]:
    """{persona_id: profile} from a synthesis output directory (its personas.json) or a
    .json/.jsonl file of objects with ``persona_id`` and ``description`` (``occupation``
    optional); an error names the file, the row and the field."""
    path = Path(path)
    if path.is_dir():
        path = path.parent / PERSONAS_FILE if path.name == "instances" else path / PERSONAS_FILE
    try:
        text = path.read_text(encoding="utf-8")
        rows = [json.loads(line) for line in text.split("\n") if line.strip()] if path.suffix == ".jsonl" \
            else json.loads(text)
    except (OSError, ValueError) as exc:
        raise BadInput(f"persona_profiles: {path}: cannot read it ({exc})") from None
    rows = rows.get("personas") if isinstance(rows, dict) else rows
    if not isinstance(rows, list):
        raise BadInput(f"persona_profiles: {path}: expected a list of personas (or {{\"personas\": [...]}})")
    profiles = {}
    for number, row in enumerate(rows, start=1):
        for field in ("persona_id", "description"):
            if not isinstance(row, dict) or not isinstance(row.get(field), str) or not row[field].strip():
                raise BadInput(f"persona_profiles: {path}: row {number}: field {field!r} must be a non-empty string")
        profiles[row["persona_id"]] = {"persona_id": row["persona_id"], "description": row["description"],
                                       "occupation": row.get("occupation")}
    return profiles


def profile_sources(results_dir: str | Path) -> list[Path]:
    """The synthesis output directories the runs under ``results_dir`` evaluated (their
    run.json's data_source), where a persona's profile is found beside its instances."""
    from ..evaluation.report.results import find_run_dirs

    found = []
    for run_dir in find_run_dirs(results_dir):
        source = (read_json(run_dir / "run.json") or {}).get("data_source")
        for candidate in (Path(source), Path(source).parent) if isinstance(source, str) else ():
            if (candidate / PERSONAS_FILE).is_file() and candidate not in found:
                found.append(candidate)
    return found


def choose_personas(args: argparse.Namespace) -> list[dict]:
    """The experiment's personas with their profiles: those OUTPUT_DIR/personas.json pinned at
    the first run, or --personas, or the worst --n_personas of --from_results."""
    pinned = Path(args.output_dir) / PERSONAS_FILE
    if pinned.is_file():
        personas = read_json(pinned)["personas"]
        if args.personas and sorted(args.personas) != sorted(p["persona_id"] for p in personas):
            raise BadInput(f"personas: {pinned} holds this experiment's personas "
                           f"({', '.join(p['persona_id'] for p in personas)}); give the same, or another --output_dir")
        return personas
    if args.personas:
        personas = [{"persona_id": pid} for pid in dict.fromkeys(args.personas)]
    elif args.from_results:
        personas = worst_personas(args.from_results, args.n_personas)
    else:
        raise BadInput("personas: give --personas ID ... or --from_results RESULTS_DIR")
    sources = [args.persona_profiles] if args.persona_profiles else \
        profile_sources(args.from_results) if args.from_results else []
    profiles: dict[str, dict] = {}
    for source in sources:
        profiles = {**read_profiles(source), **profiles}
    missing = [p["persona_id"] for p in personas if p["persona_id"] not in profiles]
    if missing:
        where = ", ".join(map(str, sources)) or "no profile source (give --persona_profiles)"
        raise BadInput(f"persona_profiles: no profile for {', '.join(missing)} in {where}")
    return [{**p, **profiles[p["persona_id"]]} for p in personas]


# ---------------------------------------------------------------------------------------
# The plan: models, data sets, directories
# ---------------------------------------------------------------------------------------
def model_family(spec: str, overrides: dict[str, str]) -> tuple[str, str]:
    """(label, family) of a model. The family is the maker: the org of an ``org/name``
    served by a host (Together, vLLM), else the provider (OpenAI, Anthropic, Google). Not
    ``Model.family_of``, which groups by parameter rules: Claude 3.5 and 3.7 Sonnet are one
    family in §F.5 but two there. ``overrides``: {label or spec: family}."""
    from ..utils.models.registry import resolve_model

    model = resolve_model(spec)
    label = model.label
    org = label.split("/", 1)[0] if "/" in label else ""
    family = overrides.get(spec) or overrides.get(label) or (org or model.provider or label).lower()
    return label, family


class Plan:
    def __init__(self, args: argparse.Namespace, personas: list[dict]):
        self.args, self.personas = args, personas
        self.out = Path(args.output_dir)
        overrides = dict(args.family or [])
        self.models = {spec: model_family(spec, overrides) for spec in dict.fromkeys(args.models)}
        names = [safe_name(label) for label, _ in self.models.values()]
        if len(set(names)) < len(names):
            raise BadInput(f"models: two of {', '.join(self.models)} have the same name")
        by_name = {name: spec for spec, (label, _) in self.models.items() for name in (spec, label)}
        self.existing = {}
        for name, path in args.existing_data or []:
            if name not in by_name:
                raise BadInput(f"existing_data: {name} is not one of --models")
            self.existing[by_name[name]] = path

    def data_dir(self, spec: str) -> Path:
        return self.out / "data" / safe_name(self.models[spec][0])

    def results_dir(self, spec: str) -> Path:
        return self.out / "results" / safe_name(self.models[spec][0])

    def synthesis_arguments(self, spec: str, output_dir: Path | None = None) -> dict:
        from ..synthesis.personas import BATCH_SIZE, SEED

        a = self.args
        return dict(output_dir=output_dir or self.data_dir(spec), model=spec, user_model=None,
                    assistant_model=a.assistant_model, decomposer_model=None, all_models=None, embedded=False,
                    n_personas=len(self.personas), n_factors=a.n_factors, n_sessions=a.n_sessions,
                    max_turns=a.max_turns, n_workers=a.n_workers, seed=SEED, persona_seeds=None,
                    persona_batch_size=BATCH_SIZE, max_regenerations=config.MAX_PARSE_RETRIES,
                    batch=a.batch, no_progress=a.no_progress)

    def evaluation_arguments(self, spec: str, dataset: str, data) -> dict:
        a = self.args
        return dict(model=spec, evaluator=a.evaluator, data=data, task="both", results_dir=str(self.results_dir(dataset)),
                    n_workers=a.n_workers, batch=a.batch, rate_limit=list(a.rate_limit))

    def seed_personas(self, directory: Path) -> None:
        """The profiles as the synthesis's personas.json, described already: its first stage
        (descriptions) has nothing to do, and every model starts from the same personas."""
        if not (directory / PERSONAS_FILE).exists():
            atomic_write_json(directory / PERSONAS_FILE, {
                "seed_source": f"self-enhancement personas ({self.out / PERSONAS_FILE})",
                "personas": [{"persona_id": p["persona_id"], "description": p["description"],
                              "occupation": p.get("occupation")} for p in self.personas]})

    def dataset_rows(self, spec: str) -> list[dict]:
        """A model's data set: its synthesized instances, or --existing_data's instances of
        the experiment's personas (§F.5 took the original instances as Claude 3.7 Sonnet's)."""
        if spec in self.existing:
            from ..evaluation.data import load_instances

            ids = {p["persona_id"] for p in self.personas}
            rows = [i.to_row() for i in load_instances(data_path=self.existing[spec]) if i.persona_id in ids]
            if not rows:
                raise BadInput(f"existing_data: {self.existing[spec]} holds no instance of the experiment's personas")
            return rows
        directory = self.data_dir(spec) / "instances"
        return [read_json(p) for p in sorted(directory.glob("*.json"))] if directory.is_dir() else []


# ---------------------------------------------------------------------------------------
# Running it
# ---------------------------------------------------------------------------------------
def run(plan: Plan) -> int:
    from ..evaluation.api import evaluate
    from ..synthesis.api import synthesize

    status = 0
    for spec in plan.models:
        if spec in plan.existing:
            continue
        plan.data_dir(spec).mkdir(parents=True, exist_ok=True)
        plan.seed_personas(plan.data_dir(spec))
        print(f"=== synthesizing {len(plan.personas)} personas with {plan.models[spec][0]} into "
              f"{plan.data_dir(spec)} ===", file=sys.stderr, flush=True)
        made = synthesize(**plan.synthesis_arguments(spec), rate_limit=list(plan.args.rate_limit))
        for failure in made.failures:
            status = 1
            print(f"FAILED {failure['persona_id']} at {failure['stage']}: {failure['reason']}", file=sys.stderr)
    for dataset in plan.models:
        rows = plan.dataset_rows(dataset)
        if not rows:
            status = 1
            print(f"note: no instance in {plan.models[dataset][0]}'s data set; its column stays empty", file=sys.stderr)
            continue
        data = rows if dataset in plan.existing else str(plan.data_dir(dataset))
        for spec in plan.models:
            print(f"=== evaluating {plan.models[spec][0]} on the data set by {plan.models[dataset][0]} ===",
                  file=sys.stderr, flush=True)
            done = evaluate(**plan.evaluation_arguments(spec, dataset, data))
            if done.failed:
                status = 1
                print(failed_line(plan.models[spec][0], plan.models[dataset][0], done), file=sys.stderr)
    return status


def failed_line(model: str, maker: str, done) -> str:
    """One line for an evaluation whose instances failed: which, how many, at which step, why."""
    by_step = done.results["counts"]["failures_by_step"]
    why = "; ".join(f"{step}: {reason} ({n})" for step, reasons in by_step.items() for reason, n in reasons.items())
    return (f"FAILED {model} on the data set by {maker}: {done.failed} instance{'s' * (done.failed != 1)} failed "
            f"(rerun to ask them again); {why}")


def write_matrix(plan: Plan) -> list[Path]:
    from ..evaluation.report import figure10 as figure

    models = [figure.Side(label, family) for label, family in plan.models.values()]
    datasets = [figure.DataSet(label, family, plan.results_dir(spec), len(plan.dataset_rows(spec)))
                for spec, (label, family) in plan.models.items()]
    data = figure.matrix(models, datasets, n_bootstrap=plan.args.n_bootstrap, seed=plan.args.seed)
    data["personas"] = plan.personas
    return figure.write(data, plan.out, figure=not plan.args.no_figures)


# ---------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------
def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.rpartition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected MODEL=VALUE, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    from ..synthesis.options import SynthesisConfig
    from ..utils.command_line import Parser, positive_int, program_name

    d = SynthesisConfig()
    p = Parser(prog=program_name("python -m cupid.studies.self_enhancement"),
               description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--models", nargs="+", required=True,
                   help="models that each synthesize a data set and are each evaluated on every one")
    p.add_argument("--output_dir", required=True, help="data/, results/ and the matrix go here")
    who = p.add_argument_group("personas (pinned in OUTPUT_DIR/personas.json by the first run)")
    who.add_argument("--personas", nargs="+", metavar="ID", help="persona ids")
    who.add_argument("--from_results", metavar="RESULTS_DIR",
                     help="else: the personas with the lowest mean F1 over the runs there (§F.5)")
    who.add_argument("--n_personas", type=positive_int, default=64, help="how many, with --from_results")
    who.add_argument("--persona_profiles", metavar="PATH",
                     help="their profiles: a synthesis output directory, or a .json/.jsonl file of "
                          "{persona_id, description[, occupation]} (docs/self_enhancement.md); default: "
                          "the synthesis output directories the --from_results runs evaluated")
    p.add_argument("--existing_data", type=key_value, action="append", metavar="MODEL=PATH",
                   help="take PATH's instances of the personas as MODEL's data set instead of synthesizing "
                        "(§F.5 did so for Claude 3.7 Sonnet with the original instances); repeatable")
    p.add_argument("--family", type=key_value, action="append", metavar="MODEL=FAMILY",
                   help="a model's family, where the rule (the org of org/name, else the provider) is wrong")
    p.add_argument("--evaluator", default=config.DEFAULT_EVALUATOR, help="decomposes, matches and judges")
    p.add_argument("--assistant_model", default=d.assistant_model, help="the synthesis's assistant simulator")
    p.add_argument("--n_factors", type=positive_int, default=d.n_factors, help="synthesis: context factors a persona")
    p.add_argument("--n_sessions", type=positive_int, default=d.n_sessions, help="synthesis: sessions a persona")
    p.add_argument("--max_turns", type=positive_int, default=d.max_turns, help="synthesis: turns a dialogue")
    p.add_argument("--n_workers", type=positive_int, default=4, help="concurrent calls, in both engines")
    p.add_argument("--batch", action="store_true", help="through the providers' batch APIs (both engines)")
    p.add_argument("--rate_limit", action="append", default=[], metavar="[MODEL=]tpm=N,rpm=N",
                   help="as cupid-eval's and cupid-synth's; repeatable")
    p.add_argument("--n_bootstrap", type=positive_int, default=1000, help="resamples of the intervals")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    p.add_argument("--no_figures", action="store_true", help="no PNG")
    p.add_argument("--no_progress", action="store_true", help="no synthesis progress bars")
    p.add_argument("--dry_run", action="store_true", help="price the whole experiment; send and write nothing")
    p.add_argument("--json", action="store_true", help="with --dry_run: the forecast as JSON on the last line")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        plan = Plan(args, choose_personas(args))
        if args.dry_run:
            from .self_enhancement_dry_run import dry_run

            return dry_run(plan, args.json)
        plan.out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(plan.out / PERSONAS_FILE, {"personas": plan.personas})
        with SignalGuard():
            status = run(plan)
        for path in write_matrix(plan):
            print(f"wrote {path}")
        return status
    except Interrupted as exc:
        print(redact(f"\n{exc.message}\nrerun the same command to resume"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # between the engines' calls
        print(f"\n{stop_cause(exc)}: rerun the same command to resume", file=sys.stderr)
        return stop_status(exc)
    except CupidError as exc:
        return print_error(exc)


def console() -> None:
    """The console script ``cupid-self-enhancement``."""
    sys.exit(main())


if __name__ == "__main__":
    console()
