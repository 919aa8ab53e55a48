"""toolshim: an OpenAI-compatible proxy that makes tool calling work whatever model is loaded."""

__version__ = "0.1.0"
"""the one place the version is written; pyproject.toml reads it from here."""
