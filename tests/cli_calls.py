"""In-process `bda` calls shared by the CLI tests: ``invoke``, ``ok`` and ``user_error``."""
from typer.testing import CliRunner

from bda_jax.cli import app

runner = CliRunner()


def invoke(*args, input=None):
    """One in-process `bda` call on a fixed 160-column console: the tables' line breaks do not
    depend on the terminal running the tests (pytest-xdist workers report 80 columns)."""
    return runner.invoke(app, [str(a) for a in args], input=input, env={"COLUMNS": "160"})


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def user_error(result, *fragments):
    """Exit 2 and exactly one `error: ...` line on stderr, no traceback; each of ``fragments``
    is in that line, which is returned."""
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
