"""The model layer: ``from cupid.utils.models import Model, register_model`` is what a user's
model needs (model.py's ``__all__`` lists the rest of the extension point). Every module in
this package is imported by ``discover_models()`` so that its ``@register_model`` classes
become available by name; none may do I/O at import."""


def __getattr__(name: str):
    import importlib

    model = importlib.import_module("cupid.utils.models.model")
    if name in model.__all__:
        return getattr(model, name)
    raise AttributeError(f"module 'cupid.utils.models' has no attribute {name!r}")
