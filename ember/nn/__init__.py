"""``ember.nn``: modules, layers, initialisation and the functional API."""
from . import functional  # noqa: F401
