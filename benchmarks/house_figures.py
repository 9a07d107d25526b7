"""The code's shape in figures: product lines and modules, the largest file, import circles,
upward arrows and file names two modules share for different jobs (read by tests/test_layout.py's
own readers, which the layout tests hold to 0), and the product modules whose code runs while
one instance goes through the benchmark (a profiler over every thread, one sample instance,
task both, the scripted model as the evaluated model and the evaluator; nothing is sent).

    python benchmarks/house_figures.py [--list]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_layout import import_circles, import_graph, layer, product_modules, shared_file_names  # noqa: E402


def shape() -> dict:
    modules = product_modules()
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules.items()}
    graph = import_graph()
    largest = max(lines, key=lines.get)
    return {
        "product_lines": sum(lines.values()), "modules": len(modules),
        "largest": f"{modules[largest].relative_to(ROOT)} ({lines[largest]} lines)",
        "import_circles": len(import_circles(graph)),
        "upward_arrows": sum(layer(t) > layer(s) for s, targets in graph.items() for t in targets),
        "file_names_twice": sorted(shared_file_names()),
    }


def modules_on_one_instance_path() -> list[str]:
    """Product modules with code that ran while one instance was evaluated (imports aside:
    a module counts when one of its functions is called)."""
    from cupid.evaluation.api import evaluate

    modules = product_modules()
    by_file = {str(path.resolve()): name for name, path in modules.items()}
    seen: set[str] = set()

    def profile(frame, event, arg):  # noqa: ARG001 - the profiler's signature
        if event == "call" and frame.f_code.co_name != "<module>":
            name = by_file.get(frame.f_code.co_filename)
            if name:
                seen.add(name)

    with tempfile.TemporaryDirectory() as out:
        # Warm up (imports, prompt loading) so that only the instance's own path is profiled.
        evaluate("scripted", evaluator="scripted", data=str(ROOT / "data" / "sample"), limit=1,
                 task="both", results_dir=Path(out) / "warm", n_workers=1, on_event=lambda e: None)
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            evaluate("scripted", evaluator="scripted", data=str(ROOT / "data" / "sample"), limit=1,
                     task="both", results_dir=Path(out) / "run", n_workers=1, on_event=lambda e: None)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    return sorted(seen)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", action="store_true", help="also list the modules on the instance's path")
    args = p.parse_args(argv)
    for key, value in shape().items():
        print(f"{key}: {value}")
    path = modules_on_one_instance_path()
    print(f"modules_on_one_instance_path: {len(path)}")
    if args.list:
        for name in path:
            print(f"  {name}")


if __name__ == "__main__":
    main()
