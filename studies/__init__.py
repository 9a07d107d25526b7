"""Studies that compose both halves of the harness: they synthesize data (synthesis/) and
evaluate models on it (evaluation/), so they live above both, and neither half imports them."""

if __name__ == "studies":  # imported from an uninstalled checkout, as ``python -m studies.…``
    import importlib.util

    if importlib.util.find_spec("cupid") is None:
        raise SystemExit("error: the harness is not installed: in this checkout run "
                         "`pip install -r requirements.txt` (or `pip install -e .`), then `cupid-self-enhancement --help`")
