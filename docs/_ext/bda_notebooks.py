"""The notebooks of the docs site: Sphinx reads sources under ``docs/`` only, so the notebooks of
``notebooks/`` (stored without outputs, where the tests and README point) are copied into the
gitignored ``docs/notebooks/`` before each build (:func:`copy_notebooks`), where myst-nb executes
them. Each copy carries the package's fingerprint in a hidden cell (:func:`notebook_copy`).

This module imports no Sphinx (``tests/integration/test_docs_site.py`` tests it directly).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
#: where Sphinx reads the notebooks from (gitignored; kept between builds for the mtime check)
NOTEBOOK_COPIES = ROOT / "docs" / "notebooks"
#: the id of the hidden cell :func:`notebook_copy` appends
FINGERPRINT_CELL = "bda-docs-fingerprint"


def package_fingerprint(root: Path = ROOT) -> str:
    """SHA-256 (16 hex digits) of every file of the package (``bda_jax/``, ``models/*.py``)."""
    digest = hashlib.sha256()
    files = sorted((root / "bda_jax").rglob("*")) + sorted((root / "models").glob("*.py"))
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def notebook_copy(source: Path, fingerprint: str) -> bytes:
    """The notebook as Sphinx reads it: the stored notebook plus one hidden code cell (tag
    ``remove-cell``) holding the package fingerprint as a comment. jupyter-cache keys a notebook
    on its code, so a change to the package runs the notebooks again instead of showing the
    outputs of the old code; with neither changed, the cached outputs are used."""
    nb = json.loads(source.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": FINGERPRINT_CELL,
                        "metadata": {"tags": ["remove-cell"]}, "outputs": [],
                        "source": [f"# bda_jax package fingerprint {fingerprint} (docs build)"]})
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def copy_notebooks(sources: Path = NOTEBOOKS, copies: Path = NOTEBOOK_COPIES,
                   fingerprint: str | None = None) -> list[Path]:
    """``sources/*.ipynb`` -> ``copies/`` (:func:`notebook_copy`), rewriting only the copies whose
    bytes changed (Sphinx rereads a source by its modification time) and removing a copy whose
    notebook is gone. Returns the copies written."""
    copies.mkdir(parents=True, exist_ok=True)
    found = {p.name: p for p in sorted(sources.glob("*.ipynb"))}
    for stale in copies.glob("*.ipynb"):
        if stale.name not in found:
            stale.unlink()
    fingerprint = fingerprint or package_fingerprint()
    written = []
    for name, source in found.items():
        copy, text = copies / name, notebook_copy(source, fingerprint)
        if not copy.exists() or copy.read_bytes() != text:
            copy.write_bytes(text)
            written.append(copy)
    return written
