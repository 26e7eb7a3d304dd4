"""pyproject.toml declares what the wheel ships: setuptools installs only the packages it lists
and only the data files its package-data globs match, so a new subpackage or data file that is not
declared would work from the repository and be missing from a user's install. The wheel itself is
built, installed and run by ``make wheel-check`` (.ci/run)."""
import fnmatch
import runpy
import tomllib
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = CONFIG["tool"]["setuptools"]


def _source_dir(package: str) -> Path:
    """The folder a package installs from (package-dir maps bda_jax.models to models/)."""
    mapped = SETUPTOOLS.get("package-dir", {})
    if package in mapped:
        return ROOT / mapped[package]
    return ROOT / package.replace(".", "/")


def _shipped_files(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_file() and p.suffix not in (".pyc",)]


def tree_packages() -> set[str]:
    """Every folder under bda_jax/ that holds a file, as a dotted name, and bda_jax.models."""
    found = {"bda_jax.models"}
    for folder in [ROOT / "bda_jax", *(ROOT / "bda_jax").rglob("*")]:
        if folder.is_dir() and "__pycache__" not in folder.parts and _shipped_files(folder):
            found.add(".".join(folder.relative_to(ROOT).parts))
    return found


def test_every_folder_with_files_is_a_declared_package():
    declared = set(SETUPTOOLS["packages"])
    assert declared == tree_packages(), (
        f"add to [tool.setuptools] packages: {sorted(tree_packages() - declared)}; "
        f"listed but not in the tree: {sorted(declared - tree_packages())}")


def test_every_data_file_is_matched_by_package_data():
    globs = SETUPTOOLS["package-data"]
    missing = []
    for package in SETUPTOOLS["packages"]:
        for path in _shipped_files(_source_dir(package)):
            if path.suffix == ".py":
                continue
            if not any(fnmatch.fnmatch(path.name, g) for g in globs.get(package, [])):
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"not in [tool.setuptools.package-data], so not in the wheel: {missing}"


def test_py_typed_ships_and_the_version_has_one_definition():
    assert (ROOT / "bda_jax" / "py.typed").is_file()
    assert "py.typed" in SETUPTOOLS["package-data"]["bda_jax"]
    assert "version" in CONFIG["project"]["dynamic"] and "version" not in CONFIG["project"]
    attr = SETUPTOOLS["dynamic"]["version"]["attr"]
    module, name = attr.rsplit(".", 1)
    version = runpy.run_path(str(ROOT / (module.replace(".", "/") + ".py")))[name]
    import bda_jax
    assert version == bda_jax.__version__


def test_mypy_checks_every_public_subpackage():
    """[tool.mypy] files: every public package's ``__init__`` (not _core, not the data folders)
    and models/, so a new public subpackage is type-checked from its first day."""
    public = {f"{p.replace('.', '/')}/__init__.py" for p in SETUPTOOLS["packages"]
              if p not in ("bda_jax.models", "bda_jax.data")
              and not p.startswith(("bda_jax._", "bda_jax.data."))}
    assert set(CONFIG["tool"]["mypy"]["files"]) == public | {"models"}
