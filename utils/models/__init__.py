"""Model classes. Every module in this package is imported by ``discover_models()`` so that
its ``@register_model`` classes become available by name; none may do I/O at import."""
