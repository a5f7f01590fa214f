"""c3: the application layer — the CLI entry point and the Textual cockpit."""

__version__ = "0.1.0"
