"""The docs site (`make docs`, docs/conf.py) stays complete without building it.

- API reference: every package setuptools installs that exports names has a page in docs/api/
  (listed by its toctree), and the text its ``bda-api`` directive parses documents each name of
  the package's ``__all__`` (``bda_jax.models``: of each public module's), no more; a re-export
  points at a name that is documented in full.
- CLI reference: every visible command of the Typer app has a section and each of its visible
  arguments and options an ``.. option::`` entry.
- The landing page's Python block runs; the notebooks' build copies change when the package does;
  the reST escapes of help texts and docstrings leave what they must.

docs/_ext's modules import no Sphinx, so this runs on the test install alone.
"""
from __future__ import annotations

import importlib
import json
import re
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import bda_api  # noqa: E402  (docs/_ext on the path first)
import bda_notebooks  # noqa: E402
import bda_rst  # noqa: E402


def installed_packages() -> list[str]:
    """The packages pyproject.toml installs that a user imports names from: not private (no ``_``
    part), not the data folders (``bda_jax.data...``, which export no name)."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    return [p for p in listed
            if not any(part.startswith("_") for part in p.split("."))
            and p != "bda_jax.data" and not p.startswith("bda_jax.data.")]


def expected_names(package: str) -> set[str]:
    """Fully qualified public names: the ``__all__`` of the package, or, for a package without
    one, of each public module in its folder."""
    module = importlib.import_module(package)
    if hasattr(module, "__all__"):
        return {f"{package}.{n}" for n in module.__all__}
    names = set()
    for path in Path(module.__file__).parent.glob("*.py"):
        if not path.name.startswith("_"):
            sub = importlib.import_module(f"{package}.{path.stem}")
            names |= {f"{sub.__name__}.{n}" for n in sub.__all__}
    return names


def api_page(package: str) -> Path:
    return DOCS / "api" / f"{package.removeprefix('bda_jax.') if package != 'bda_jax' else 'bda_jax'}.rst"


def test_every_installed_package_has_an_api_page_in_the_toctree():
    packages = installed_packages()
    assert "bda_jax" in packages and "bda_jax.models" in packages and len(packages) >= 14, packages
    assert sorted(bda_api.public_packages()) == sorted(packages)
    index = (DOCS / "api" / "index.md").read_text()
    toctree = re.search(r"```\{toctree\}\n(.*?)```", index, re.S).group(1)
    listed = {line.strip() for line in toctree.splitlines() if line.strip() and not line.startswith(":")}
    for package in packages:
        page = api_page(package)
        assert page.exists(), f"{package}: no API page {page.relative_to(ROOT)}"
        assert f".. bda-api:: {package}\n" in page.read_text(), page
        assert page.stem in listed, f"docs/api/index.md's toctree does not list {page.stem}"


@pytest.fixture(scope="module")
def documented() -> dict[str, set[str]]:
    return {p: bda_api.documented_names(bda_api.api_rst(p)) for p in bda_api.public_packages()}


@pytest.mark.parametrize("package", installed_packages())
def test_api_page_documents_every_public_name(package, documented):
    expected = expected_names(package)
    assert expected, package
    missing = sorted(expected - documented[package])
    extra = sorted(documented[package] - expected)
    assert not missing, f"{package}: public names missing from the API reference: {missing}"
    assert not extra, f"{package}: documented but not public: {extra}"


def test_functions_and_classes_are_autodocumented_once_and_reexports_point_at_them(documented):
    everywhere = set().union(*documented.values())
    full = {}
    for package in bda_api.public_packages():
        text = bda_api.api_rst(package)
        for entry in bda_api.entries(package):
            if entry.canonical != entry.qualname:
                assert entry.canonical in everywhere, f"{entry.qualname} points at {entry.canonical}"
                assert f"Re-export of :{'func' if entry.kind == 'function' else entry.kind}:" \
                       f"`{entry.canonical}`" in text
            elif entry.kind != "data":
                assert f"\n.. auto{entry.kind}:: {entry.qualname}\n" in text, entry
                obj = getattr(importlib.import_module(entry.owner), entry.qualname.rpartition(".")[2])
                full.setdefault(id(obj), []).append(entry.qualname)
    twice = [names for names in full.values() if len(names) > 1]
    assert not twice, f"documented in full more than once (one should be a re-export): {twice}"


def test_a_constant_shows_its_comment_from_the_defining_module():
    # bda_jax/_core/selection.py: "#: The paper's grids (docs/evaluation.md), one row per configuration."
    text = bda_api.api_rst("bda_jax")
    entry = text[text.index(".. py:data:: GRIDS\n"):]
    assert entry.startswith(".. py:data:: GRIDS\n   :module: bda_jax\n   :type: dict\n\n"
                            "   The paper's grids (docs/evaluation.md), one row per configuration.")


def _cli_tree():
    """(program, option strings) of every visible command, walked here from the Typer app."""
    import typer.main
    from bda_jax.cli import app

    def walk(cmd, ctx, prog):
        yield prog, [o for p in cmd.get_params(ctx) if not getattr(p, "hidden", False) and p.name != "help"
                     for o in (p.opts + p.secondary_opts)]
        for name in getattr(cmd, "commands", {}):
            sub = cmd.commands[name]
            if not sub.hidden:
                yield from walk(sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True),
                                f"{prog} {name}")

    root = typer.main.get_command(app)
    return list(walk(root, root.make_context("bda", [], resilient_parsing=True), "bda"))


def test_cli_reference_has_every_command_and_option():
    import bda_cli_ref
    text = bda_cli_ref.cli_rst()
    sections = {m.group(1): m.group(2) for m in
                re.finditer(r"^\.\. program:: ([^\n]+)\n(.*?)(?=^\.\. program:: |\Z)", text, re.M | re.S)}
    tree = _cli_tree()
    assert len(tree) >= 20 and {"bda stop replay", "bda label next", "bda council run"} <= {p for p, _ in tree}
    for prog, opts in tree:
        assert prog in sections, f"{prog}: no section in the CLI reference"
        if prog != "bda":
            assert f"\n{prog}\n{'=-~'[prog.count(' ') - 1] * len(prog)}\n" in text, f"{prog}: no heading"
        entries = re.findall(r"^\.\. option:: (.+)$", sections[prog], re.M)
        for opt in opts:
            assert any(re.search(rf"(^|[ ,/]){re.escape(opt)}($|[ ,])", e) for e in entries), \
                f"{prog}: {opt} is not documented ({entries})"


def test_landing_page_python_block_runs(tmp_path, monkeypatch, capsys):
    text = (DOCS / "index.md").read_text()
    blocks = [textwrap.dedent(b) for b in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)]
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "docs/index.md", "exec"), {"__name__": "__main__"})
    # the bundled example council has 6 tasks: a [6, K] table and 6 confidences
    printed = capsys.readouterr().out
    assert printed.count("]\n [") == 5, printed


def test_notebook_copies_carry_the_package_fingerprint(tmp_path):
    sources, copies = tmp_path / "nb", tmp_path / "copies"
    sources.mkdir()
    stored = json.loads((ROOT / "notebooks" / "01_quickstart.ipynb").read_text())
    (sources / "a.ipynb").write_text(json.dumps(stored))
    (copies).mkdir()
    (copies / "gone.ipynb").write_text("{}")
    assert bda_notebooks.copy_notebooks(sources, copies, "f1") == [copies / "a.ipynb"]
    assert sorted(p.name for p in copies.iterdir()) == ["a.ipynb"]
    copy = json.loads((copies / "a.ipynb").read_text())
    assert copy["cells"][:-1] == stored["cells"] and copy["metadata"] == stored["metadata"]
    hidden = copy["cells"][-1]
    assert hidden["cell_type"] == "code" and hidden["metadata"]["tags"] == ["remove-cell"]
    assert "f1" in "".join(hidden["source"])
    assert bda_notebooks.copy_notebooks(sources, copies, "f1") == []          # unchanged: not rewritten
    assert bda_notebooks.copy_notebooks(sources, copies, "f2") == [copies / "a.ipynb"]
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.reads((copies / "a.ipynb").read_text(), as_version=4))


def test_package_fingerprint_follows_the_package_files(tmp_path):
    (tmp_path / "bda_jax" / "__pycache__").mkdir(parents=True)
    (tmp_path / "models").mkdir()
    (tmp_path / "bda_jax" / "a.py").write_text("x = 1\n")
    (tmp_path / "models" / "m.py").write_text("y = 2\n")
    first = bda_notebooks.package_fingerprint(tmp_path)
    (tmp_path / "bda_jax" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    assert bda_notebooks.package_fingerprint(tmp_path) == first
    (tmp_path / "models" / "m.py").write_text("y = 3\n")
    assert bda_notebooks.package_fingerprint(tmp_path) != first


def test_help_text_escapes():
    assert bda_rst.escape_help("DASE history file (safe_DASE_*.jsonl).") == \
        "DASE history file (safe_DASE\\_\\*.jsonl)."
    assert bda_rst.escape_help("a | b, `x_*` and ``y_|``") == "a \\| b, `x_*` and ``y_|``"
    assert bda_rst.escape_help("snake_case stays") == "snake_case stays"


def test_docstring_bars_are_escaped_in_prose_only():
    lines = ["ECE = sum_m |B_m| / n |acc_m - conf_m|", "``|x|`` and `|y|`", "a | b | c",
             ">>> abs(-1) |x| ", "Example::", "", "   |literal|", "after |z|"]
    bda_rst.escape_bars(lines)
    assert lines == ["ECE = sum_m \\|B_m\\| / n \\|acc_m - conf_m\\|", "``|x|`` and `|y|`", "a | b | c",
                     ">>> abs(-1) |x| ", "Example::", "", "   |literal|", "after \\|z\\|"]
