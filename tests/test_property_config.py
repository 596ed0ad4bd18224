"""Property tests (hypothesis) of the config schema and loader: random values and random YAML never
produce anything but a ConfigError naming the key or file, and accepted seeds are integers in
[0, 2^32 - 1]."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traintime.core.config import merge_config_files, validate_config
from traintime.core.config_checks import check_config, load_config_file
from traintime.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "config.schema.yaml"
# the effective default (config.yaml holds only overrides; the schema fills in every other key)
DEFAULT = validate_config(merge_config_files([REPO / "config.yaml"]), SCHEMA)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from([42.0, 2**32 - 1, 2**32, -1, "42", "T4", "RTX-9090", "resnet50", "sgd", ""]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=5), scalars, max_size=2))

#: keys a user is likely to set (dotted paths into config.yaml)
KEYS = ["seeds", "seeds[0]", "collect.seed", "emulation.batch_size", "example.gpus", "example.model",
        "example.batch_size", "emulation.figures.bar_targets", "emulation.figures.bar_targets[0]",
        "emulation.reference_host", "chronos_iteration.protocols", "chronos_convergence.methods",
        "data.mirror", "data.allow_download", "collect.benchmark.batch_sizes", "collect.benchmark.optimizers",
        "emulation.host.p_grid", "example.learning_rate", "chronos_iteration.families"]


def _set(config: dict, key: str, value: object) -> None:
    *parents, last = key.split(".")
    node = config
    for p in parents:
        node = node[p]
    if last.endswith("[0]"):
        node[last[:-3]][0] = value
    else:
        node[last] = value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), value=values)
def test_random_value_is_refused_naming_the_key_or_accepted_valid(key: str, value: object) -> None:
    config = copy.deepcopy(DEFAULT)
    _set(config, key, value)
    try:
        check_config(config, SCHEMA, names=True)
    except ConfigError as exc:
        msg = str(exc)
        assert msg.startswith("config: ") and "\n" not in msg
        top = key.split(".")[0].replace("[0]", "")
        assert top in msg or "(top level)" in msg, (key, msg)
        return
    seeds = config["seeds"]
    assert isinstance(seeds, list) and seeds
    assert all(type(s) is int and 0 <= s <= 2**32 - 1 for s in seeds)
    assert type(config["collect"]["seed"]) is int
    assert type(config["emulation"]["batch_size"]) is int


yaml_texts = st.one_of(
    st.text(max_size=60),
    st.builds(lambda k, v: f"{k}: {v}\n{k}: {v}\n", st.sampled_from(["seeds", "data", "x"]), st.integers()),
    st.sampled_from(["", "   \n", "# c\n", "- 1\n- 2\n", "seeds: [1,\n", "\t seeds: 1", "a: b: c", "{}", "[]",
                     "null", "!!python/object:os.system {}", "&a [*a]", "seeds: &x [1]\nother: *x\n"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=yaml_texts)
def test_random_config_text_loads_or_is_one_config_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "c.yaml"
        f.write_text(text, encoding="utf-8")
        try:
            out = load_config_file(f)
        except ConfigError as exc:
            assert str(f) in str(exc) and "\n" not in str(exc)
            return
    assert isinstance(out, dict) and text.strip()  # an accepted file is a non-empty mapping
