"""Which host measurement rows can be trusted: the restriction check of every row.

A restricted host row is only worth as much as the check that the restriction was really in force.
:func:`check_rows` gives every host row (schema ``host_latency``) a ``check`` status and a
``check_reason``:

``passed``
    the restriction was read back and matches the request: for an SM restriction (``mps``,
    ``green_ctx``) the SMs read back in the measuring process (``effective_sms``) are within
    :data:`SM_TOLERANCE_PCT` percentage points of the requested share ``requested_sm_pct`` of the
    host's SMs (spec table); for a locked clock (``requested_clock_mhz`` set, backend not
    ``analytic_clock``) the clock read back during the run (``effective_clock_mhz``) is within
    :data:`CLOCK_TOLERANCE_PCT` percent of the request.
``failed``
    a read-back disagrees with the request, or the measuring script recorded that its binding
    check failed (``check`` = failed, or a note saying the green-context partition is not binding).
``skipped``
    a restriction was requested but not read back (``effective_sms`` / ``effective_clock_mhz``
    empty), or the measuring script recorded that it skipped its check (``check`` = skipped).
``not_needed``
    no restriction (backend ``none``; ``analytic_clock`` rescales afterwards and locks nothing).

The raw measurement files keep every row with its status (the sweep writers fill ``check``);
:func:`trusted` keeps ``passed`` and ``not_needed`` rows only, and the analysis
(:func:`traintime.emulation.analysis.load_host_rows`) reads nothing else, so an untrusted row reaches
no table and no prediction.
"""

from __future__ import annotations

import logging
import math

import pandas as pd

from traintime.emulation.schema import CHECKS

log = logging.getLogger(__name__)

__all__ = ["CHECKS", "TRUSTED", "check_rows", "row_check", "trusted"]
TRUSTED: tuple[str, ...] = ("passed", "not_needed")
#: Allowed |read-back SM share - requested share|, percentage points of the host's SMs.
SM_TOLERANCE_PCT = 2.0
#: Allowed |read-back clock - requested clock| / requested clock, percent.
CLOCK_TOLERANCE_PCT = 2.0
SM_BACKENDS = ("mps", "green_ctx")
#: Note text written by benchmarks/device/emulation_h200.py when its green-context check failed.
NOT_BINDING = "not binding"


def _isnan(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA


def row_check(row: pd.Series | dict, host_sms: int | None) -> tuple[str, str]:
    """(check, reason) of one host row (see the module doc); ``host_sms``: SMs of the host GPU
    (None when the host is not in the spec table: the SM read-back is then only required to exist)."""
    g = row.get
    recorded = g("check")
    note = "" if _isnan(g("note")) else str(g("note"))
    if recorded == "failed" or NOT_BINDING in note:
        return "failed", "the measuring script's restriction check failed"
    backend = g("backend")
    sm_restricted = backend in SM_BACKENDS and not _isnan(g("requested_sm_pct")) and float(g("requested_sm_pct")) < 100
    clock_locked = backend != "analytic_clock" and not _isnan(g("requested_clock_mhz"))
    if not sm_restricted and not clock_locked:
        return ("skipped", "the measuring script skipped its check") if recorded == "skipped" \
            else ("not_needed", "no restriction")
    reasons = []
    if sm_restricted:
        eff = g("effective_sms")
        if _isnan(eff):
            return "skipped", "SM restriction requested but the SMs were not read back"
        if host_sms:
            got = 100.0 * float(eff) / float(host_sms)
            want = float(g("requested_sm_pct"))
            if abs(got - want) > SM_TOLERANCE_PCT:
                return "failed", (f"SMs read back {int(eff)} of {host_sms} = {got:.1f}% vs requested {want:.1f}% "
                                  f"(tolerance {SM_TOLERANCE_PCT:g} points)")
        reasons.append(f"{int(eff)} SMs read back")
    if clock_locked:
        eff = g("effective_clock_mhz")
        want = float(g("requested_clock_mhz"))
        if _isnan(eff):
            return "skipped", "clock lock requested but the clock was not read back"
        if abs(float(eff) - want) / want * 100.0 > CLOCK_TOLERANCE_PCT:
            return "failed", (f"clock read back {float(eff):g} MHz vs requested {want:g} MHz "
                              f"(tolerance {CLOCK_TOLERANCE_PCT:g}%)")
        reasons.append(f"clock {float(eff):g} MHz read back")
    if recorded == "skipped":
        return "skipped", "the measuring script skipped its check"
    return "passed", "; ".join(reasons)


def check_rows(rows: pd.DataFrame, specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """``rows`` with ``check`` and ``check_reason`` set for every row (see the module doc)."""
    from traintime.core.errors import UnknownNameError
    from traintime.core.specs import gpu_row, load_specs

    out = rows.copy()
    if out.empty:
        out["check"], out["check_reason"] = pd.Series(dtype=object), pd.Series(dtype=object)
        return out
    specs = load_specs() if specs is None else specs
    sms: dict[str, int | None] = {}
    for h in out["host_gpu"].unique():
        try:
            sms[h] = int(gpu_row(h, specs)["sms"])
        except (UnknownNameError, KeyError, TypeError, ValueError):
            sms[h] = None
    res = [row_check(r, sms.get(r["host_gpu"])) for r in out.to_dict("records")]
    out["check"] = [c for c, _ in res]
    out["check_reason"] = [why for _, why in res]
    return out


def trusted(rows: pd.DataFrame, specs: pd.DataFrame | None = None,
            source: str = "host rows") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(trusted rows, excluded rows), both with ``check`` / ``check_reason``; logs the exclusions."""
    checked = check_rows(rows, specs)
    keep = checked["check"].isin(TRUSTED)
    bad = checked[~keep]
    if not bad.empty:
        counts = bad["check"].value_counts().to_dict()
        log.warning("%s: %d row(s) excluded from every table (restriction check %s)", source, len(bad), counts)
    return checked[keep].reset_index(drop=True), bad.reset_index(drop=True)
