"""The ``bda`` command line: the app and shared helpers in ``_app``, one module per command
group; a command parses its options, calls one library function and formats the result."""
from . import _audit, _broadcast, _council, _demo, _models, _stop, _studies  # noqa: F401  (each registers its commands)
from ._app import (
    app,
    available_memory,
    check_memory,
    example_traces_path,
    main,
    simulation_bytes,
)
from ._files import sniff_file_kind

__all__ = ["app", "available_memory", "check_memory", "example_traces_path", "main",
           "simulation_bytes", "sniff_file_kind"]
