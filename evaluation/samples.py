"""The per-sample rows' old module name, which the docs once gave (``from cupid.evaluation.samples
import sample_rows``): kept so that users' scripts importing it keep working. The rows are
built in sample_rows.py."""
from .sample_rows import sample_rows  # noqa: F401 (the documented old name)
