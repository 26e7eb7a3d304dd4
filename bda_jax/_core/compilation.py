"""JAX's persistent compilation cache for the command line, the demo and the notebooks
(docs/cli.md, "Compilation cache").

Almost all the time of a short ``bda`` call is XLA compiling the same small programs again.
:func:`enable_compilation_cache` points JAX's persistent cache at a user cache folder so a second
call loads them from disk instead. Importing bda_jax never calls it (a library leaves its user's
JAX configuration alone); the ``bda`` command calls it at start (``--no-compile-cache`` turns it
off) and the notebooks call it in their first cell.

Where: ``path`` if given, else ``$BDA_JAX_CACHE_DIR``, else a folder JAX is already configured
with (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``; used as it is), else
``$XDG_CACHE_HOME/bda_jax/jax`` (``~/.cache/bda_jax/jax`` without ``XDG_CACHE_HOME``).
``BDA_JAX_COMPILATION_CACHE=0`` (or ``false``, ``no``, ``off``) turns it off everywhere.
"""
from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

__all__ = ["enable_compilation_cache", "default_cache_dir", "CompilationCacheWarning",
           "DEFAULT_MAX_BYTES", "ENV_DIR", "ENV_SWITCH"]

ENV_DIR = "BDA_JAX_CACHE_DIR"
ENV_SWITCH = "BDA_JAX_COMPILATION_CACHE"
#: Size bound of a folder this module chose: past it, the oldest entries are removed at start.
DEFAULT_MAX_BYTES = 1 << 30
_OFF = ("0", "false", "no", "off")
_ENTRY_SUFFIX = "-cache"          # JAX's file cache: one ``<key>-cache`` file per executable
_ATIME_SUFFIX = "-atime"          # ... and, with its own LRU bound, an access-time file beside it
#: The subfolder of exported programs (bda_jax._core.exported) and their files' suffix.
EXPORTED_SUBFOLDER = "exported"
EXPORT_SUFFIX = ".jaxexport"
_EXPORTED: list[Path | None] = [None]        # the folder exported programs go to, if any


class CompilationCacheWarning(UserWarning):
    """The compilation cache folder cannot be created or written: the run goes on without it."""


def switched_off() -> bool:
    """Whether ``BDA_JAX_COMPILATION_CACHE`` turns the cache off (``0``, ``false``, ``no``,
    ``off``; any case)."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() in _OFF


def default_cache_dir() -> Path:
    """``$BDA_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/bda_jax/jax``, else
    ``~/.cache/bda_jax/jax`` (a relative ``XDG_CACHE_HOME`` is ignored, as the XDG spec says)."""
    given = os.environ.get(ENV_DIR, "").strip()
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "bda_jax" / "jax"


def _usable(folder: Path) -> None:
    """Create ``folder`` and write (then remove) one file there; raises OSError if either
    fails."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=".bda-probe-", dir=folder)
    os.close(fd)
    os.unlink(probe)


def prune(folder: Path, max_bytes: int) -> int:
    """Remove cache entries of ``folder`` -- JAX's compiled programs and this package's exported
    ones (``folder/exported``, :mod:`bda_jax._core.exported`) -- oldest first (by modification
    time), until they take at most ``max_bytes``; returns how many were removed. Other files are
    never touched; an entry that vanishes meanwhile (another process pruning) is skipped."""
    entries = []
    for where, suffix in ((folder, _ENTRY_SUFFIX), (folder / EXPORTED_SUBFOLDER, EXPORT_SUFFIX)):
        try:
            it = os.scandir(where)
        except FileNotFoundError:
            continue
        with it:
            for entry in it:
                if entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    entries.append((st.st_mtime_ns, entry.path, st.st_size))
    total = sum(size for _, _, size in entries)
    removed = 0
    for _, path, size in sorted(entries):
        if total <= max_bytes:
            break
        victims = [path]
        if path.endswith(_ENTRY_SUFFIX):
            victims.append(path[: -len(_ENTRY_SUFFIX)] + _ATIME_SUFFIX)
        for victim in victims:
            try:
                os.unlink(victim)
            except FileNotFoundError:
                pass
        total -= size
        removed += 1
    return removed


def exported_folder() -> Path | None:
    """Where :func:`bda_jax._core.exported.persistent_jit` keeps its programs: ``exported/`` in
    the folder :func:`enable_compilation_cache` chose, or ``None`` (no cache, or a JAX cache
    folder of the user's own, which this package leaves as it is)."""
    return _EXPORTED[0]


def set_exported_folder(folder: Path | None) -> Path | None:
    """Point :func:`exported_folder` at ``folder`` (``None``: keep no exported programs);
    returns the previous folder. :func:`enable_compilation_cache` calls it."""
    previous, _EXPORTED[0] = _EXPORTED[0], None if folder is None else Path(folder)
    return previous


def enable_compilation_cache(path=None, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Path | None:
    """Turn on JAX's persistent compilation cache; returns the folder in use, or ``None`` when
    it is off.

    ``path``: the cache folder (default: ``$BDA_JAX_CACHE_DIR``; else a folder JAX is already
    configured with, kept as it is with JAX's own thresholds; else
    ``$XDG_CACHE_HOME/bda_jax/jax`` or ``~/.cache/bda_jax/jax``). Every compiled program is
    cached, however small or quick to compile (``jax_persistent_cache_min_compile_time_secs``
    0, no minimum entry size): bda_jax compiles many small CPU programs, each cheaper to load
    than to compile. A folder chosen here is kept under ``max_bytes`` (default 1 GiB) by
    removing its oldest entries at start; delete the folder to clear it. In a folder chosen
    here (not one the user configured JAX with), the largest functions are also kept traced, as
    JAX exports in ``exported/`` (:mod:`bda_jax._core.exported`), so a later process skips
    tracing and lowering them too.

    ``BDA_JAX_COMPILATION_CACHE=0`` turns the cache off (returns ``None``, changes nothing). A
    folder that cannot be created or written gives one :class:`CompilationCacheWarning` and
    ``None``: the run goes on without a cache. Call it before the first compilation to cache
    everything; a later call takes effect from the next compilation. The cache is trusted code:
    never point it at a folder others may write (JAX's persistent cache guide).

    >>> import bda_jax as bda
    >>> folder = bda.enable_compilation_cache()       # doctest: +SKIP
    """
    set_exported_folder(None)
    if switched_off():
        return None
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    current = jax.config.jax_compilation_cache_dir
    if path is None and not os.environ.get(ENV_DIR, "").strip() and current:
        return Path(current)                           # the user's own JAX cache: theirs
    folder = None
    try:
        folder = Path(os.path.abspath(Path(path).expanduser() if path is not None
                                      else default_cache_dir()))
        _usable(folder)
        prune(folder, max_bytes)
    except (OSError, RuntimeError) as err:         # RuntimeError: no home folder to expand
        why = getattr(err, "strerror", None) or str(err) or type(err).__name__
        warnings.warn(f"compilation cache {str(folder)!r} is not usable ({why}); running "
                      f"without it (set {ENV_DIR} to another folder, or {ENV_SWITCH}=0)",
                      CompilationCacheWarning, stacklevel=2)
        return None
    if current != str(folder):
        if current:
            compilation_cache.reset_cache()            # JAX opens its cache folder only once
        jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    set_exported_folder(folder / EXPORTED_SUBFOLDER)
    return folder
