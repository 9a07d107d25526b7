"""CUPID as inspect_ai tasks: ``inspect eval cupid/inference`` and ``cupid/generation``
(docs/inspect.md). Installed with the ``inspect`` extra; nothing else imports this package.

The tasks are the benchmark's own parts run by inspect: each sample's input is the request
an evaluation step renders (evaluation/steps/), the scorers are the pipeline's chains
(evaluation/pipeline.py) asking the grader, the metrics are evaluation/metrics.py's over the
pooled counts. ``tasks`` registers them (the ``inspect_ai`` entry point), ``requests`` holds
the parameters each model family is sent and the re-asks, ``samples`` the data, ``scorers``
and ``metrics`` the scoring.
"""
