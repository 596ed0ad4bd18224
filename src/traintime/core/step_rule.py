"""The rule that picks ``traintime predict``'s default step-time model (``--step-model auto``), in one place.

Rule (declared before the first comparison)
    A learned step model becomes the default only if its MAPE is lower than that of the calibrated roofline
    (``roofline_calibrated``) on every protocol of :data:`RULE_PROTOCOLS` of rule ``predict_step_grouped``'s
    outer folds (:func:`wins`). Protocols added later (``chronos LOMO`` / ``chronos LODO``, the external check, the
    largest-batch rows) are reported beside the rule, never part of it.
Record
    Rule ``predict_step_grouped`` writes the verdict into ``models/steptime/neighbour_model.json`` (``wins_grouped``,
    and the protocols it was judged on, ``rule_protocols``); ``auto`` reads it back (:func:`auto_step`), so the
    default follows the results of the run.
Readers
    ``traintime predict`` (:func:`traintime.predict_step_models.auto_step_model`), the issue-targets table
    (:mod:`traintime.core.targets`) and the README block ``predict-step-rule`` (:mod:`traintime.core.readme`). This
    module imports neither torch nor predict's model code, so analysis-env rules can read the rule too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from traintime.core.errors import DataUnavailableError

#: protocols of the rule, as declared before the first comparison
RULE_PROTOCOLS: tuple[str, ...] = ("traces LOGO", "traces LOMO", "traces LOGenO", "chronos LOGO")
#: file of the neighbour step model (under ``models/steptime/``) that records the verdict
NEIGHBOUR_MODEL_FILE = "neighbour_model.json"


def rule_text(protocols: Sequence[str] = RULE_PROTOCOLS) -> str:
    """``every protocol of the rule (...)`` naming ``protocols``."""
    return "every protocol of the rule (" + ", ".join(protocols) + ")"


RULE_TEXT = rule_text()


def wins(summary: pd.DataFrame, new: str = "efficiency", old: str = "roofline_calibrated") -> bool:
    """True when ``new`` has a lower MAPE than ``old`` on every protocol of :data:`RULE_PROTOCOLS` (``summary``:
    rows of protocol, method, mape_pct; other protocols are ignored)."""
    keep = summary["protocol"].isin(RULE_PROTOCOLS)
    s = summary[keep].pivot(index="protocol", columns="method", values="mape_pct")
    return bool(len(s) and (s[new] < s[old]).all())


def read_verdict(path: str | Path) -> tuple[bool, list[str] | None] | None:
    """(won, protocols judged on or None) recorded in the neighbour model file ``path``; None when there is no file.
    A file that cannot be read or parsed raises :class:`~traintime.core.errors.DataUnavailableError` naming it."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataUnavailableError(f"neighbour step model {path} cannot be read ({exc})") from None
    if not isinstance(doc, dict):
        raise DataUnavailableError(f"neighbour step model {path} cannot be read (not a JSON object)")
    protocols = doc.get("rule_protocols")
    return bool(doc.get("wins_grouped")), (list(protocols) if protocols else None)


def auto_step(path: str | Path) -> tuple[str, str]:
    """(``neighbour`` or ``roofline``, why): what ``--step-model auto`` uses, from the neighbour model file ``path``."""
    verdict = read_verdict(path)
    if verdict is None:
        return "roofline", f"{path} not found"
    won, protocols = verdict
    text = rule_text(protocols) if protocols else RULE_TEXT
    if won:
        return "neighbour", f"it beat the calibrated roofline on {text}"
    return "roofline", f"the neighbour model did not beat it on {text}"
