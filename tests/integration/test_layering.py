"""The package's layering contract (docs/architecture.md, "Layers"), checked by parsing imports.

Every import of every module under ``bda_jax/`` and ``models/`` (module level and the lazy ones
inside functions) is resolved to the subpackage it lands in. A subpackage may import only the
layers listed for it in ``ALLOWED``; an import that crosses into another subpackage uses that
subpackage's public ``__init__`` (never one of its ``_private`` modules), and no module imports
an underscore-private name from another module. The CLI imports public names only (no
``bda_jax._core``). Tests and benchmarks import public names, except the files listed in
``PRIVATE_IMPORTS_ALLOWED`` (each says why at the import).
"""
import ast
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())

#: layer -> the layers it may import (itself always allowed). "bda_jax" is the top-level
#: ``bda_jax/__init__.py`` (the core surface plus the evaluation harness).
ALLOWED = {
    "_core": set(),
    "metrics": {"_core"},
    "simulate": {"_core"},
    "datasets": {"_core"},
    "crowd": {"_core", "metrics"},
    "audit": {"_core", "metrics"},
    "aggregators": {"_core", "metrics", "crowd"},
    "models": {"_core", "crowd"},
    "stopping": {"_core", "metrics", "datasets"},
    "adversarial": {"_core", "metrics", "aggregators", "simulate"},
    "active": {"_core", "metrics", "aggregators"},
    "council": {"_core", "datasets", "metrics", "aggregators", "stopping", "audit"},
    "report": {"_core", "metrics", "aggregators", "simulate", "adversarial", "crowd", "datasets",
               "stopping", "audit", "bda_jax"},
    "cli": {"bda_jax", "metrics", "aggregators", "simulate", "adversarial", "crowd", "datasets",
            "stopping", "audit", "report", "models", "council", "active"},
    "bda_jax": {"_core", "aggregators"},
    "data": set(),
}

#: test and benchmark files that import a private module or name, and why (kept short on purpose)
PRIVATE_IMPORTS_ALLOWED = {
    "benchmarks/bench_onecoin.py": "the kernel's table size, to time the kernel at its default",
}


def _modules():
    for path in sorted((ROOT / "bda_jax").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts), path.name == "__init__.py"
    for path in sorted((ROOT / "models").glob("*.py")):
        name = "bda_jax.models" + ("" if path.stem == "__init__" else "." + path.stem)
        yield path, name, path.name == "__init__.py"


def _imports(path: Path, module: str, is_package: bool):
    """(line, imported module, imported names or None) for every import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            yield node.lineno, target, [a.name for a in node.names]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "bda_jax":
        return None
    if len(parts) == 1:
        return "bda_jax"
    return "cli" if parts[1] == "__main__" else parts[1]     # python -m bda_jax runs the CLI


def _private_part(module: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in module.split(".")[1:])


def _violations():
    out = []
    for path, module, is_package in _modules():
        here = _layer(module)
        rel = path.relative_to(ROOT)
        for line, target, names in _imports(path, module, is_package):
            there = _layer(target)
            if there is None:
                continue
            where = f"{rel}:{line}: {module} imports {target}"
            if there != here:
                if here not in ALLOWED:
                    out.append(f"{where}: {here!r} has no entry in ALLOWED")
                elif there not in ALLOWED[here]:
                    out.append(f"{where}: layer {here!r} may not import {there!r}")
                elif there != "_core" and _private_part(target):
                    out.append(f"{where}: cross-layer import of a private module")
                elif here == "cli" and there == "_core":
                    out.append(f"{where}: the CLI imports public names only")
            if names and target != module:
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                if private:
                    out.append(f"{where}: private names {private}")
            if target.startswith("bda_jax._src"):
                out.append(f"{where}: bda_jax._src no longer exists")
    return out


def test_layering_contract():
    violations = _violations()
    assert not violations, "\n".join(violations)


def test_every_subpackage_has_a_layer():
    layers = {p.name for p in (ROOT / "bda_jax").iterdir() if (p / "__init__.py").exists()}
    assert layers | {"bda_jax", "models"} <= set(ALLOWED) | {"bda_jax"}, \
        sorted(layers - set(ALLOWED))


@pytest.mark.parametrize("folder", ["tests", "benchmarks"])
def test_tests_and_benchmarks_import_public_names(folder):
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in PRIVATE_IMPORTS_ALLOWED:
            continue
        for line, target, names in _imports(path, path.stem, False):
            if not target or not target.startswith("bda_jax"):
                continue
            private_names = [n for n in names or () if n.startswith("_") and n != "__version__"]
            if _private_part(target) or private_names:
                text = path.read_text().splitlines()[line - 1]
                if "# private:" not in text:      # a test of a private helper says why, inline
                    bad.append(f"{rel}:{line}: {target} {private_names or ''}")
    assert not bad, "\n".join(bad)


def test_the_checker_sees_violations(tmp_path):
    """The resolver maps relative imports to layers (so the contract above can fail)."""
    f = tmp_path / "mod.py"
    f.write_text("from .._core.kernels import _excess_table\nfrom ..crowd._glad import x\n")
    found = list(_imports(f, "bda_jax.metrics._scores", False))
    assert [(t, n) for _, t, n in found] == [("bda_jax._core.kernels", ["_excess_table"]),
                                             ("bda_jax.crowd._glad", ["x"])]
    assert _private_part("bda_jax.crowd._glad") and not _private_part("bda_jax.crowd")
