"""The ``[methods]`` table of a council config (docs/llm-methods.md): its seats and settings,
the defaults of ``MethodsConfig.seat``, every refusal naming the file and the dotted field, the
fingerprint of a config without the table (unchanged from before methods existed), and
``make_method`` building each method from it."""
import hashlib
import json

import pytest

from bda_jax import DataError
from bda_jax.council import (METHOD_SEATS, ArgLLMs, CouncilConfig, Endpoint, MethodsConfig,
                             MoA, Price, Runtime, Seat, SelfMoA, make_method, read_config)

BASE = '''
rounds = 2
samples = 1
seed = 3
[endpoints.local]
base_url = "http://127.0.0.1:8080/v1"
[endpoints.big]
base_url = "https://api.example.com/v1"
api_key_env = "BIG_KEY"
max_concurrency = 2
[[seats]]
name = "first"
endpoint = "local"
model = "small"
temperature = 0.9
seed = 4
role = "adversary"
max_tokens = 128
[[seats]]
name = "second"
endpoint = "local"
model = "small"
[prices.small]
prompt_per_million = 0.5
completion_per_million = 1.5
'''

METHODS = '''
[methods]
samples = 4
depth = 2
breadth = 3
root_base = 0.5
[methods.synthesizer]
endpoint = "big"
model = "large"
seed = 9
[methods.sampler]
endpoint = "local"
model = "small"
temperature = 1.1
[methods.judge]
endpoint = "big"
model = "judge-model"
max_tokens = 16
'''


def _cfg(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_methods_table(tmp_path):
    cfg = read_config(_cfg(tmp_path, BASE + METHODS))
    m = cfg.methods
    assert (m.samples, m.depth, m.breadth, m.root_base) == (4, 2, 3, 0.5)
    # a seat is named after its role, honest, with the role's temperature unless given
    assert m.synthesizer == Seat("synthesizer", "big", "large", 0.0, 9, "honest", 512)
    assert m.sampler == Seat("sampler", "local", "small", 1.1, None, "honest", 512)
    assert m.judge == Seat("judge", "big", "judge-model", 0.0, None, "honest", 16)
    assert m.generator is None and m.evaluator is None
    seats = cfg.seats
    assert m.seat("synthesizer", seats) is m.synthesizer
    assert m.seat("evaluator", seats) == m.synthesizer        # the evaluator defaults to it
    assert m.seat("judge", seats) == m.judge
    gen = m.seat("generator", seats)                           # the first seat, honest
    assert gen == Seat("generator", "local", "small", 0.9, 4, "honest", 512)


def test_role_temperatures_when_given_without_one(tmp_path):
    tables = "".join(f'[methods.{role}]\nendpoint = "local"\nmodel = "m"\n'
                     for role in METHOD_SEATS)
    m = read_config(_cfg(tmp_path, BASE + "[methods]\n" + tables)).methods
    assert {role: getattr(m, role).temperature for role in METHOD_SEATS} == \
        {"synthesizer": 0.0, "sampler": 0.7, "generator": 0.7, "evaluator": 0.0, "judge": 0.0}
    assert m.root_base == "evaluator" and (m.samples, m.depth, m.breadth) == (6, 1, 1)


def test_defaults_without_a_methods_table(tmp_path):
    cfg = read_config(_cfg(tmp_path, BASE))
    assert cfg.methods == MethodsConfig()
    first = cfg.seats[0]
    m = cfg.methods
    synth = m.seat("synthesizer", cfg.seats)
    # the council's first seat, at temperature 0, honest even where the seat plays rho
    assert (synth.name, synth.endpoint, synth.model, synth.temperature, synth.seed, synth.role,
            synth.max_tokens) == ("synthesizer", "local", "small", 0.0, 4, "honest", 512)
    assert first.role == "adversary"
    assert m.seat("evaluator", cfg.seats) == synth
    for role in ("sampler", "generator"):
        s = m.seat(role, cfg.seats)
        assert (s.name, s.model, s.temperature, s.role) == (role, "small", 0.9, "honest")
    assert m.seat("judge", cfg.seats) is None
    assert (m.samples, m.depth, m.breadth, m.root_base) == (6, 1, 1, "evaluator")


@pytest.mark.parametrize("table, field, words", [
    ("[methods]\ncolour = 1\n", "methods.colour", "unknown key"),
    ("[methods.synthesizer]\nendpoint = \"local\"\nmodel = \"m\"\ncolour = 1\n",
     "methods.synthesizer.colour", "unknown key"),
    ("[methods.synthesizer]\nendpoint = \"local\"\nmodel = \"m\"\nrole = \"adversary\"\n",
     "methods.synthesizer.role", "unknown key"),
    ("[methods.judge]\nendpoint = \"nowhere\"\nmodel = \"m\"\n", "methods.judge.endpoint",
     "not defined"),
    ("[methods.evaluator]\nendpoint = \"local\"\n", "methods.evaluator.model", "missing"),
    ("[methods.sampler]\nendpoint = \"local\"\nmodel = \"m\"\ntemperature = 2.5\n",
     "methods.sampler.temperature", "<= 2"),
    ("[methods.generator]\nendpoint = \"local\"\nmodel = \"m\"\nmax_tokens = 0\n",
     "methods.generator.max_tokens", ">= 1"),
    ("[methods.generator]\nendpoint = \"local\"\nmodel = \"m\"\nseed = 1.5\n",
     "methods.generator.seed", "integer"),
    ("[methods]\nsynthesizer = \"big\"\n", "methods.synthesizer", "table"),
    ("[methods]\nsamples = 0\n", "methods.samples", ">= 1"),
    ("[methods]\ndepth = 0\n", "methods.depth", ">= 1"),
    ("[methods]\nbreadth = 1.5\n", "methods.breadth", "integer"),
    ("[methods]\nroot_base = 1.5\n", "methods.root_base", "<= 1"),
    ("[methods]\nroot_base = -0.1\n", "methods.root_base", ">= 0"),
    ("[methods]\nroot_base = \"half\"\n", "methods.root_base", "number"),
    ("methods = 3\n", "methods", "table"),
])
def test_refusals_name_the_file_and_the_dotted_field(tmp_path, table, field, words):
    text = table + BASE if table.startswith("methods =") else BASE + table
    path = _cfg(tmp_path, text)
    with pytest.raises(DataError) as err:
        read_config(path)
    assert err.value.field == field, str(err.value)
    assert err.value.file == str(path)
    assert words in err.value.reason


def test_an_in_memory_config_checks_the_method_seats():
    ep = {"local": Endpoint("local", "http://127.0.0.1:1/v1")}
    seat = Seat("a", "local", "m")
    with pytest.raises(DataError) as err:
        CouncilConfig(endpoints=ep, seats=(seat,),
                      methods=MethodsConfig(judge=Seat("judge", "elsewhere", "m", 0.0)))
    assert err.value.field == "methods.judge.endpoint"


def test_a_config_without_methods_keeps_its_old_fingerprint(tmp_path):
    cfg = read_config(_cfg(tmp_path, BASE))
    by_hand = CouncilConfig(
        rounds=2, samples=1, seed=3,
        endpoints={"local": Endpoint("local", "http://127.0.0.1:8080/v1"),
                   "big": Endpoint("big", "https://api.example.com/v1", "BIG_KEY", 2)},
        seats=(Seat("first", "local", "small", 0.9, 4, "adversary", 128),
               Seat("second", "local", "small")),
        prices={"small": Price(0.5, 1.5)})
    assert cfg == by_hand and cfg.fingerprint() == by_hand.fingerprint()
    # the canonical document as it was before methods existed: no "methods" key at all
    ep = dict(api_key_env=None, max_concurrency=4, requests_per_minute=None, timeout_s=60.0,
              max_retries=4)
    old = {"rounds": 2, "samples": 1, "seed": 3, "max_reasks": 2, "extra_forces": [],
           "endpoints": {"big": {**ep, "name": "big", "base_url": "https://api.example.com/v1",
                                 "api_key_env": "BIG_KEY", "max_concurrency": 2},
                         "local": {**ep, "name": "local",
                                   "base_url": "http://127.0.0.1:8080/v1"}},
           "seats": [{"name": "first", "endpoint": "local", "model": "small",
                      "temperature": 0.9, "seed": 4, "role": "adversary", "max_tokens": 128},
                     {"name": "second", "endpoint": "local", "model": "small",
                      "temperature": 0.7, "seed": None, "role": "honest", "max_tokens": 256}],
           "prices": {"small": {"prompt_per_million": 0.5, "completion_per_million": 1.5}}}
    text = json.dumps(old, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert cfg.fingerprint() == hashlib.sha256(text.encode("ascii")).hexdigest()
    assert "methods" not in cfg.canonical()
    # a table restating the defaults is the same config
    same = read_config(_cfg(tmp_path, BASE + "[methods]\nsamples = 6\n", "same.toml"))
    assert same.fingerprint() == cfg.fingerprint()
    changed = read_config(_cfg(tmp_path, BASE + "[methods]\nsamples = 5\n", "changed.toml"))
    assert changed.fingerprint() != cfg.fingerprint()
    assert changed.canonical()["methods"]["samples"] == 5
    full = read_config(_cfg(tmp_path, BASE + METHODS, "full.toml"))
    assert full.canonical()["methods"]["synthesizer"]["model"] == "large"
    assert full.fingerprint() not in (cfg.fingerprint(), changed.fingerprint())


# --------------------------------------------------------------------------- make_method
def test_make_method_builds_each_method_from_the_table(tmp_path):
    cfg = read_config(_cfg(tmp_path, BASE + METHODS))
    rt = Runtime.from_config(cfg)
    assert rt.endpoints == cfg.endpoints and rt.prices == cfg.prices
    assert rt.cache_path is None and rt.cache_mode == "record"
    m = cfg.methods

    moa = make_method("moa", cfg, rt, adversaries=("first",), attack=True)
    assert isinstance(moa, MoA) and moa.name == "moa" and moa.n_proposers == 3
    assert moa.synthesizer == m.synthesizer and moa.judge == m.judge
    assert moa.adversaries == ("first",) and moa.reads_council
    assert moa.attack is False              # a council reader is attacked through its traces
    assert moa.seed == 3                    # the config's seed

    lite = make_method("moa-lite", cfg, rt, proposers=("second", "first", "third"))
    assert lite.name == "moa-lite" and lite.n_proposers == 2
    assert lite.proposers == ("second", "first")

    smoa = make_method("self-moa", cfg, rt, attack=True, seed=11)
    assert isinstance(smoa, SelfMoA) and smoa.n_samples == 4 and smoa.attack is True
    assert smoa.sampler == m.sampler and smoa.synthesizer == m.synthesizer
    assert smoa.judge == m.judge and smoa.seed == 11 and smoa.reads_council is False

    arg = make_method("argllms", cfg, rt, attack=True)
    assert isinstance(arg, ArgLLMs) and arg.attack is True
    assert (arg.depth, arg.breadth, arg.root_base) == (2, 3, 0.5)
    assert arg.generator == m.seat("generator", cfg.seats)
    assert arg.evaluator == m.synthesizer
    assert arg.reads_council is False

    default = make_method("self-moa", cfg)                # the config's own runtime
    assert default.runtime.endpoints == cfg.endpoints

    with pytest.raises(DataError) as err:
        make_method("moe", cfg, rt)
    assert err.value.field == "methods" and "moe" in err.value.reason


def test_runtime_from_config_keeps_the_cache_settings(tmp_path):
    cfg = read_config(_cfg(tmp_path, BASE))
    rt = Runtime.from_config(cfg, cache_path=tmp_path / "c.sqlite", cache_mode="replay")
    assert rt.cache_path == str(tmp_path / "c.sqlite") and rt.cache_mode == "replay"
