"""The `bda demo` main job on the bundled example and on a bad file."""
from typer.testing import CliRunner

from bda_jax.cli import app

runner = CliRunner()


def test_demo_on_bundled_example():
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert "claim-01" in result.output and "mcq-07" in result.output
    # mcq-07 under the shared Beta(2.4, 1.6): SciPy's betaln on the hand-tallied counts
    # N = (2, 3, 2), c = (0,2,0,0), (1,1,2,1), (1,2,0,1), e = (0,2,0,0), (0,1,1,0), (0,1,0,0)
    # gives (0.0029, 0.9818, 0.0124, 0.0029)
    assert "A 0.003  B 0.982  C 0.012  D 0.003" in result.output


def test_demo_reports_trace_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "x", "moves": [{"id": "1", "agent": "a", "round": 0, "force": "shout"}]}\n')
    result = runner.invoke(app, ["demo", "--traces", str(bad)])
    assert result.exit_code == 2
    assert "unknown force" in result.output and "line 1" in result.output
