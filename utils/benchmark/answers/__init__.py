"""Reading a model's answer: ``reading`` pulls a value out of the text (both pipelines),
``ours`` parses each evaluation step's answer, ``release`` says what the released harness
(kixlab/CUPID at a8560ca) makes of the same answer. Our parsers take the release's reading
first wherever it yields a usable value."""
