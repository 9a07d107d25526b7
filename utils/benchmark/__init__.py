"""The benchmark's core, shared by evaluation and synthesis: the dataset's schema
(dataset.py), the step runner that asks a prompt until its answer parses (step_runner.py),
the decomposer step both pipelines use (decomposer.py), and how an answer is read, by us
and by the released harness (answers/)."""
