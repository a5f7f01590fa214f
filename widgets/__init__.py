"""Reusable Textual widgets that render snapshots handed to them; they do no I/O."""
