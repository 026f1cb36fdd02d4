"""``ember.utils``: activation checkpointing and other helpers."""
