"""The model layer lives in ``utils/models/`` (both pipelines use it). This package keeps the
extension point ``from evaluation.models.model import Model, register_model`` working: that
name is the very module ``utils.models.model``, so a model registered through it is the same
registry's."""
import sys

from utils.models import model

sys.modules[__name__ + ".model"] = model
