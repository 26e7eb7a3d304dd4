"""Council configs: the issue's example, every refusal naming file and dotted field, the
fingerprint."""
import dataclasses

import pytest

from bda_jax import DataError
from bda_jax.council import CouncilConfig, Endpoint, Price, Seat, read_config

EXAMPLE = '''
rounds = 3
samples = 1
seed = 0
[endpoints.local]
base_url = "http://127.0.0.1:8080/v1"
max_concurrency = 4
[[seats]]
name = "gemma"
endpoint = "local"
model = "smollm2"
temperature = 0.7
[[seats]]
name = "phi"
endpoint = "local"
model = "smollm2"
temperature = 0.7
role = "adversary"
'''

FULL = '''
rounds = 2
samples = 3
seed = 11
max_reasks = 1
extra_forces = ["vote", "abstain"]
[endpoints.remote]
base_url = "https://api.example.com/v1"
api_key_env = "EXAMPLE_KEY"
max_concurrency = 2
requests_per_minute = 30
timeout_s = 12.5
max_retries = 0
[[seats]]
name = "a"
endpoint = "remote"
model = "m-1"
temperature = 0
seed = 5
max_tokens = 64
[prices.m-1]
prompt_per_million = 0.15
completion_per_million = 0.6
'''


def cfg(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_issue_example(tmp_path):
    c = read_config(cfg(tmp_path, EXAMPLE))
    assert (c.rounds, c.samples, c.seed, c.max_reasks, c.extra_forces) == (3, 1, 0, 2, ())
    assert c.endpoints == {"local": Endpoint("local", "http://127.0.0.1:8080/v1", None, 4,
                                             None, 60.0, 4)}
    assert c.seats == (Seat("gemma", "local", "smollm2", 0.7, None, "honest", 256),
                       Seat("phi", "local", "smollm2", 0.7, None, "adversary", 256))
    assert c.prices == {}


def test_every_key(tmp_path):
    c = read_config(cfg(tmp_path, FULL))
    assert (c.rounds, c.samples, c.seed, c.max_reasks) == (2, 3, 11, 1)
    assert c.extra_forces == ("vote", "abstain")
    assert c.endpoints["remote"] == Endpoint("remote", "https://api.example.com/v1",
                                             "EXAMPLE_KEY", 2, 30.0, 12.5, 0)
    assert c.seats == (Seat("a", "remote", "m-1", 0.0, 5, "honest", 64),)
    assert isinstance(c.seats[0].temperature, float)
    assert c.prices == {"m-1": Price(0.15, 0.6)}


def test_fingerprint_is_a_stable_hash_of_the_content(tmp_path):
    a = read_config(cfg(tmp_path, EXAMPLE, "a.toml"))
    b = read_config(cfg(tmp_path, "# same content, other layout\n" + EXAMPLE, "b.toml"))
    fp = a.fingerprint()
    assert len(fp) == 64 and int(fp, 16) >= 0
    assert fp == b.fingerprint()
    changed = dataclasses.replace(a, seats=(a.seats[0], dataclasses.replace(a.seats[1],
                                                                           role="honest")))
    assert changed.fingerprint() != fp
    assert dataclasses.replace(a, rounds=4).fingerprint() != fp


@pytest.mark.parametrize("edit, field, words", [
    (("rounds = 3", "rounds = 0"), "rounds", ">= 1"),
    (("rounds = 3", "rounds = 2.5"), "rounds", "integer"),
    (("rounds = 3", "rounds = true"), "rounds", "integer"),
    (("samples = 1", "samples = 0"), "samples", ">= 1"),
    (("seed = 0", "seed = 'x'"), "seed", "integer"),
    (("seed = 0", "seed = 0\nmax_reasks = -1"), "max_reasks", ">= 0"),
    (("seed = 0", "seed = 0\ncolour = 1"), "colour", "unknown key"),
    (("seed = 0", "seed = 0\nextra_forces = ['shout']"), "extra_forces[0]", "unknown extra"),
    (("seed = 0", "seed = 0\nextra_forces = ['vote', 'vote']"), "extra_forces[1]", "twice"),
    (("seed = 0", "seed = 0\nextra_forces = 'vote'"), "extra_forces", "list of strings"),
    (("max_concurrency = 4", "max_concurrency = 0"), "endpoints.local.max_concurrency", ">= 1"),
    (("max_concurrency = 4", "max_concurrency = 4\nretries = 2"), "endpoints.local.retries",
     "unknown key"),
    (("max_concurrency = 4", "max_concurrency = 4\ntimeout_s = 0"), "endpoints.local.timeout_s",
     "> 0"),
    (("max_concurrency = 4", "max_concurrency = 4\nrequests_per_minute = -1"),
     "endpoints.local.requests_per_minute", "> 0"),
    (('base_url = "http://127.0.0.1:8080/v1"', 'base_url = "127.0.0.1:8080"'),
     "endpoints.local.base_url", "http://"),
    (('base_url = "http://127.0.0.1:8080/v1"', ""), "endpoints.local.base_url", "missing"),
    (('name = "phi"', 'name = "gemma"'), "seats[1].name", "used twice"),
    (('role = "adversary"', 'role = "spy"'), "seats[1].role", "honest"),
    (('role = "adversary"', 'role = "adversary"\nendpoint2 = 1'), "seats[1].endpoint2",
     "unknown key"),
    (('temperature = 0.7\nrole', 'temperature = 2.5\nrole'), "seats[1].temperature", "<= 2"),
    (('temperature = 0.7\nrole', 'temperature = -0.1\nrole'), "seats[1].temperature", ">= 0"),
    (('temperature = 0.7\nrole', 'temperature = nan\nrole'), "seats[1].temperature", "finite"),
    (('temperature = 0.7\nrole', 'temperature = inf\nrole'), "seats[1].temperature", "finite"),
    (('temperature = 0.7\nrole', 'temperature = 0.7\nmax_tokens = 0\nrole'),
     "seats[1].max_tokens", ">= 1"),
    (('model = "smollm2"\ntemperature = 0.7\nrole', 'temperature = 0.7\nrole'), "seats[1].model",
     "missing"),
])
def test_refusals_name_file_and_field(tmp_path, edit, field, words):
    old, new = edit
    assert old in EXAMPLE
    text = EXAMPLE[::-1].replace(old[::-1], new[::-1], 1)[::-1]    # edit the last occurrence
    path = cfg(tmp_path, text)
    with pytest.raises(DataError, match=words) as info:
        read_config(path)
    assert info.value.file == str(path)
    assert info.value.field == field


def test_seat_endpoint_must_exist(tmp_path):
    path = cfg(tmp_path, EXAMPLE.replace('endpoint = "local"\nmodel = "smollm2"\ntemperature = '
                                         '0.7\nrole', 'endpoint = "cloud"\nmodel = "smollm2"\n'
                                         'temperature = 0.7\nrole'))
    with pytest.raises(DataError, match="'cloud', which is not defined") as info:
        read_config(path)
    assert (info.value.file, info.value.field) == (str(path), "seats[1].endpoint")


def test_file_level_refusals(tmp_path):
    with pytest.raises(DataError, match="cannot open"):
        read_config(tmp_path / "none.toml")
    with pytest.raises(DataError, match="invalid TOML"):
        read_config(cfg(tmp_path, "rounds = = 3"))
    with pytest.raises(DataError, match="seats") as info:
        read_config(cfg(tmp_path, "rounds = 3\n"))
    assert info.value.field == "seats"
    with pytest.raises(DataError, match="price|>= 0") as info:
        read_config(cfg(tmp_path, EXAMPLE + "[prices.smollm2]\nprompt_per_million = -1\n"
                                            "completion_per_million = 0\n"))
    assert info.value.field == "prices.smollm2.prompt_per_million"
    with pytest.raises(DataError, match="unknown key") as info:
        read_config(cfg(tmp_path, EXAMPLE + "[prices.smollm2]\nprompt_per_million = 1\n"
                                            "completion_per_million = 0\ncached = 1\n"))
    assert info.value.field == "prices.smollm2.cached"
    with pytest.raises(DataError, match="missing") as info:
        read_config(cfg(tmp_path, EXAMPLE + "[prices.smollm2]\nprompt_per_million = 1\n"))
    assert info.value.field == "prices.smollm2.completion_per_million"


def test_direct_construction_checks_cross_fields():
    ep = {"e": Endpoint("e", "http://x/v1")}
    with pytest.raises(DataError, match="at least one seat"):
        CouncilConfig(endpoints=ep, seats=())
    with pytest.raises(DataError) as info:
        CouncilConfig(endpoints=ep, seats=(Seat("a", "nope", "m"),))
    assert info.value.field == "seats[0].endpoint"
    with pytest.raises(DataError) as info:
        CouncilConfig(rounds=0, endpoints=ep, seats=(Seat("a", "e", "m"),))
    assert info.value.field == "rounds"
    with pytest.raises(DataError) as info:
        CouncilConfig(endpoints=ep, seats=(Seat("a", "e", "m", temperature=float("nan")),))
    assert info.value.field == "seats[0].temperature"
