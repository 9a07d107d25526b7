"""Studies that compose both halves of the harness: they synthesize data (synthesis/) and
evaluate models on it (evaluation/), so they live above both, and neither half imports them."""

if __name__ == "studies":  # ``python -m studies.…`` inside a checkout (utils/checkout.py)
    from utils.checkout import run_installed

    run_installed(__name__, "cupid-self-enhancement")
