"""Bundled example data (original, Apache-2.0; see NOTICE)."""
