"""``ember.distributed.nn``: collectives that autograd differentiates
(:mod:`ember.distributed.nn.functional`)."""
from . import functional

__all__ = ["functional"]
