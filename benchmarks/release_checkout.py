"""Where the released harness (kixlab/CUPID) comes from, for the scripts that run it.

Either a checkout (--release_dir, or the environment variable CUPID_RELEASE_DIR) or a git
repository holding the release commit (--release_git, or CUPID_RELEASE_GIT), from which
the commit is extracted with ``git archive``. No default: the release is not part of this
repository, and where a copy of it lives differs from machine to machine.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path

RELEASE_REPOSITORY = "kixlab/CUPID"
RELEASE_COMMIT = "a8560ca"


def add_release_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--release_dir", default=os.environ.get("CUPID_RELEASE_DIR"),
                        help="a checkout of kixlab/CUPID (default: $CUPID_RELEASE_DIR)")
    parser.add_argument("--release_git", default=os.environ.get("CUPID_RELEASE_GIT"),
                        help="a git repository (bare or not) of kixlab/CUPID, from which "
                             f"--release_commit is extracted (default: $CUPID_RELEASE_GIT)")
    parser.add_argument("--release_commit", default=RELEASE_COMMIT,
                        help=f"the release commit (default: {RELEASE_COMMIT})")


def release_checkout(args: argparse.Namespace, target: Path) -> tuple[Path, str]:
    """Copy or extract the release into ``target``; return it and the full commit id (as
    the git repository or the checkout's own .git says; else the one asked for)."""
    if bool(args.release_dir) == bool(args.release_git):
        raise SystemExit("give the release as exactly one of --release_dir (or CUPID_RELEASE_DIR) "
                         "and --release_git (or CUPID_RELEASE_GIT)")
    if args.release_dir:
        source = Path(args.release_dir)
        if not (source / "evaluation" / "run.py").is_file():
            raise SystemExit(f"--release_dir {source}: not a checkout of {RELEASE_REPOSITORY} "
                             "(no evaluation/run.py)")
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".git"))
        done = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"],
                              capture_output=True, text=True)
        commit = done.stdout.strip() if done.returncode == 0 else args.release_commit
        return target, commit
    done = subprocess.run(["git", "-C", args.release_git, "rev-parse", "--verify",
                           f"{args.release_commit}^{{commit}}"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"--release_git {args.release_git}: no commit {args.release_commit} "
                         f"({done.stderr.strip()})")
    commit = done.stdout.strip()
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", args.release_git, "archive", commit],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target, commit
