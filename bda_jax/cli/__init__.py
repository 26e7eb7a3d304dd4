"""The ``bda`` command line: one module per command group; commands parse, call one library
function and format."""
from ._app import app, main

__all__ = ["app", "main"]
