"""The default step-model rule (traintime.core.step_rule): the verdict, its record and every reader of it."""

import json

import pandas as pd
import pytest

from traintime.core.errors import DataUnavailableError
from traintime.core.readme import _step_rule
from traintime.core.step_rule import RULE_PROTOCOLS, auto_step, read_verdict, wins
from traintime.core.targets import auto_step_name
from traintime.predict_step_models import auto_step_model


def _summary(new_mape: float, worse_on: str | None = None) -> pd.DataFrame:
    rows = []
    for proto in (*RULE_PROTOCOLS, "chronos LOMO", "chronos LODO", "traces external (fit on CHRONOS only)"):
        rows.append({"protocol": proto, "method": "roofline_calibrated", "mape_pct": 40.0})
        rows.append({"protocol": proto, "method": "neighbour", "mape_pct": 50.0 if proto == worse_on else new_mape})
    return pd.DataFrame(rows)


def test_a_model_wins_only_when_it_beats_the_roofline_on_every_protocol_of_the_rule() -> None:
    assert wins(_summary(30.0), new="neighbour")
    assert not wins(_summary(30.0, worse_on="chronos LOGO"), new="neighbour")
    for beside in ("chronos LOMO", "chronos LODO", "traces external (fit on CHRONOS only)"):
        assert wins(_summary(30.0, worse_on=beside), new="neighbour")  # reported beside the rule, never in it
    assert not wins(_summary(30.0, worse_on="traces LOMO"), new="neighbour")
    assert not wins(_summary(40.0), new="neighbour")  # a tie is not a win
    assert not wins(_summary(30.0).query("protocol == 'chronos LOMO'"), new="neighbour")  # no rule protocol: no win


def _model_file(tmp_path, doc) -> object:
    path = tmp_path / "steptime" / "neighbour_model.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if doc is not None:
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.mark.parametrize("doc,expected", [({"wins_grouped": True}, "neighbour"), ({"wins_grouped": False}, "roofline"),
                                          ({}, "roofline"), (None, "roofline")])
def test_auto_follows_the_recorded_verdict_in_every_reader(tmp_path, doc, expected) -> None:
    path = _model_file(tmp_path, doc)
    assert auto_step(path)[0] == expected
    assert auto_step_model(tmp_path)[0] == expected  # traintime predict
    assert auto_step_name(path) == expected  # the issue-targets table
    if doc is not None:  # the README block
        assert _step_rule(path).endswith(f"uses `{expected}`.\n")


def test_the_reason_names_the_protocols_the_verdict_was_judged_on(tmp_path) -> None:
    path = _model_file(tmp_path, {"wins_grouped": True, "rule_protocols": ["traces LOGO", "chronos LOGO"]})
    assert read_verdict(path) == (True, ["traces LOGO", "chronos LOGO"])
    assert auto_step(path)[1] == "it beat the calibrated roofline on every protocol of the rule (traces LOGO, chronos LOGO)"
    assert "not found" in auto_step(tmp_path / "absent.json")[1]


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_an_unreadable_model_file_is_named(tmp_path, text) -> None:
    path = _model_file(tmp_path, text)
    with pytest.raises(DataUnavailableError, match="neighbour_model.json"):
        auto_step(path)
