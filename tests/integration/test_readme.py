"""README.md runs as written: every fenced code block is extracted and checked.

- ``python`` blocks run, each on its own, in a fresh namespace with an empty working folder (what
  a user pasting one block into a fresh session on a fresh install gets);
- ``bash`` blocks: every command must exist as written: a ``make`` target (``make -n``), a ``bda``
  subcommand with the options it names (read from the CLI app, nothing run), a ``python -m``
  module or a script of the repository;
- ``text`` blocks are pictures (the layout tree); a block in any other language fails until this
  file learns how to check it.

``make typecheck`` type-checks the same Python blocks against the public API:
``python tests/integration/test_readme.py --write-python DIR`` writes them to ``DIR``.
"""
from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
README = ROOT / "README.md"

# a fence opens with ```lang at some indentation (blocks inside list items are indented) and closes
# with ``` at the same indentation
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                    re.M | re.S)
CHECKED = {"python", "bash", "text"}


class Block(NamedTuple):
    lang: str       # the fence's language ("" when none)
    line: int       # 1-based README line of the opening fence
    code: str       # the body, dedented

    @property
    def name(self) -> str:
        return f"README.md:{self.line}"


def readme_blocks(text: str) -> list[Block]:
    """Every fenced code block of a Markdown text, in order."""
    return [Block(m["lang"], text.count("\n", 0, m.start()) + 1, textwrap.dedent(m["body"]))
            for m in _FENCE.finditer(text)]


def _blocks(lang: str) -> list[Block]:
    return [b for b in readme_blocks(README.read_text(encoding="utf-8")) if b.lang == lang]


def write_python_blocks(folder: Path) -> list[Path]:
    """Write README's Python blocks to ``folder`` as ``readme_L<line>.py``, one module each."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for block in _blocks("python"):
        path = folder / f"readme_L{block.line}.py"
        path.write_text(f"# {block.name}\n{block.code}", encoding="utf-8")
        paths.append(path)
    return paths



def test_fence_parser_reads_indented_and_plain_blocks():
    text = ("intro\n```bash\nmake demo\n```\n- item\n\n  ```python\n  x = 1\n  ```\n"
            "```\nbare\n```\n")
    assert readme_blocks(text) == [Block("bash", 2, "make demo\n"), Block("python", 7, "x = 1\n"),
                                   Block("", 10, "bare\n")]


def test_readme_has_blocks_and_each_language_is_checked():
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    assert {"python", "bash"} <= {b.lang for b in blocks}
    unchecked = [f"{b.name} ({b.lang or 'no language'})" for b in blocks if b.lang not in CHECKED]
    assert not unchecked, f"README blocks this test cannot check (give the fence a language it knows): {unchecked}"


@pytest.mark.parametrize("block", _blocks("python"), ids=lambda b: b.name)
def test_python_block_runs_as_written(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                     # a block writes nothing into the repository
    namespace = {"__name__": "__main__"}
    exec(compile(block.code, block.name, "exec"), namespace)      # traceback lines name README lines


# ---------------------------------------------------------------------------------------- bash


def _bda_command_exists(words: list[str]) -> None:
    """``bda [root options] sub [sub ...] [options]``: every subcommand and every ``--option``
    named exists in the app (read from the click command tree; nothing runs)."""
    import typer.main

    from bda_jax.cli import app

    command = typer.main.get_command(app)
    path = ["bda"]
    for word in words[1:]:
        subcommands = getattr(command, "commands", None)      # a group: its subcommands by name
        if word.startswith("-"):
            option = word.split("=", 1)[0]
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
            assert option in known, f"`{' '.join(path)}` has no option {option}"
        elif subcommands is not None:
            assert word in subcommands, f"`{' '.join(path)}` has no subcommand {word!r}"
            command, path = subcommands[word], [*path, word]


def _make_target_exists(words: list[str]) -> None:
    targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    for target in targets or [""]:
        done = subprocess.run(["make", "-n", "-C", str(ROOT), *([target] if target else [])],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"`make -n {target}`: {done.stderr.strip()}"


def _python_target_exists(words: list[str]) -> None:
    if "-m" in words:
        module = words[words.index("-m") + 1]
        top = ROOT / module.replace(".", "/")
        assert (top.with_suffix(".py").is_file() or (top / "__init__.py").is_file()
                or importlib.util.find_spec(module) is not None), f"no module {module}"
    elif len(words) > 1 and words[1].endswith(".py"):
        assert (ROOT / words[1]).is_file(), f"no script {words[1]}"


_PROGRAMS = {"make": _make_target_exists, "bda": _bda_command_exists,
             "python": _python_target_exists, "python3": _python_target_exists}


def bash_commands(code: str) -> list[list[str]]:
    """The commands of a bash block: one per line, comments dropped, the program's folder
    (``.venv/bin/bda``) dropped."""
    commands = []
    for line in code.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append([Path(words[0]).name, *words[1:]])
    return commands


def test_bash_commands_parse():
    assert bash_commands("make demo   # the main job\n\n.venv/bin/bda demo --quick  # 20 s\n") == [
        ["make", "demo"], ["bda", "demo", "--quick"]]


def test_bda_command_check_refuses_unknown_names():
    _bda_command_exists(["bda", "--debug", "demo", "--quick", "--out", "x"])
    with pytest.raises(AssertionError, match="no subcommand 'nonesuch'"):
        _bda_command_exists(["bda", "nonesuch"])
    with pytest.raises(AssertionError, match="has no option --nonesuch"):
        _bda_command_exists(["bda", "demo", "--nonesuch"])


@pytest.mark.parametrize("block", _blocks("bash"), ids=lambda b: b.name)
def test_bash_block_commands_exist(block):
    commands = bash_commands(block.code)
    assert commands, f"{block.name}: an empty bash block"
    for words in commands:
        check = _PROGRAMS.get(words[0])
        assert check is not None, (f"{block.name}: no check for the program {words[0]!r} "
                                   f"(teach tests/integration/test_readme.py, or make the block text)")
        check(words)


if __name__ == "__main__":          # python tests/integration/test_readme.py --write-python DIR
    if len(sys.argv) != 3 or sys.argv[1] != "--write-python":
        sys.exit("usage: test_readme.py --write-python DIR")
    for written in write_python_blocks(Path(sys.argv[2])):
        print(written)
