"""Split-conformal intervals reach their nominal coverage on synthetic data with known noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from traintime.chronos.conformal import (
    SplitConformal,
    calibration_mask,
    combine_log_halfwidths,
    grouped_coverage,
    min_calibration_groups,
)
from traintime.chronos.interval_math import seed_floored_halfwidth


def _draw(rng, n, sigma=0.3):
    pred = rng.uniform(1, 100, n)
    return pred * np.exp(rng.normal(0, sigma, n)), pred


@pytest.mark.parametrize("coverage", [0.8, 0.9])
def test_coverage_on_fresh_data_with_known_noise(coverage: float) -> None:
    measured = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        cal_t, cal_p = _draw(rng, 400)
        new_t, new_p = _draw(rng, 4000)
        cp = SplitConformal(coverage).fit(cal_t, cal_p)
        measured.append(cp.coverage_on(new_t, new_p))
        # the quantile of |N(0, 0.3)| at the nominal level
        z = {0.8: 1.2816, 0.9: 1.6449}[coverage]
        assert cp.log_halfwidth == pytest.approx(0.3 * z, rel=0.15)
    assert np.mean(measured) == pytest.approx(coverage, abs=0.02)
    assert min(measured) >= coverage - 0.05


def test_grouped_calibration_weights_groups_equally() -> None:
    rng = np.random.default_rng(0)
    # one big noisy-free group and 19 small noisy groups: the group-weighted quantile follows the groups
    t0, p0 = np.full(5000, 10.0), np.full(5000, 10.0)
    ts, ps, gs = [t0], [p0], [np.zeros(5000)]
    for g in range(1, 20):
        t, p = _draw(rng, 20)
        ts.append(t), ps.append(p), gs.append(np.full(20, g))
    t, p, g = map(np.concatenate, (ts, ps, gs))
    ungrouped = SplitConformal(0.9).fit(t, p).log_halfwidth
    grouped = SplitConformal(0.9).fit(t, p, g).log_halfwidth
    assert ungrouped < 0.05 < grouped  # pooled rows are dominated by the exact group


def test_leave_one_group_out_coverage_near_nominal() -> None:
    rng = np.random.default_rng(1)
    t, p = _draw(rng, 3000)
    g = rng.integers(0, 30, 3000)
    out = grouped_coverage(t, p, g, 0.9)
    # conformal on 29 calibration groups is conservative by at most ~1/29
    assert out["groups"] == 30 and 0.88 <= out["measured"] <= 0.9 + 1 / 29 + 0.02


def test_grouped_coverage_floor_and_row_weights() -> None:
    """A floor on the half-width (the seed spread) widens every interval that is narrower; ``group_weighted``
    false calibrates on the pooled residuals (a big exact group then sets the quantile), and the per-row hits add
    up to the count."""
    rng = np.random.default_rng(3)
    t, p = _draw(rng, 400, 0.3)
    g = np.repeat(np.arange(8), 50)
    plain = grouped_coverage(t, p, g, 0.9, finite_sample=False)
    floored = grouped_coverage(t, p, g, 0.9, finite_sample=False, floor=5.0)
    assert floored["measured"] == 1.0 and np.all(floored["log_halfwidths"] == 5.0)
    assert sum(h for h in plain["hits"] if h) == plain["covered"] and None not in plain["hits"]
    assert np.nanmax(plain["log_halfwidths"]) < 5.0
    t2 = np.concatenate([t[:50], np.full(350, 1.0)])  # group 0 noisy, seven groups exact
    p2 = np.concatenate([p[:50], np.full(350, 1.0)])
    by_row = grouped_coverage(t2, p2, g, 0.9, finite_sample=False, group_weighted=False)
    assert by_row["log_halfwidths"][0] == SplitConformal(0.9, finite_sample=False).fit(t2[50:], p2[50:]).q_ == 0.0


def test_combine_and_bad_input() -> None:
    assert combine_log_halfwidths(0.3, 0.4) == pytest.approx(0.5)
    assert combine_log_halfwidths(0.3, float("nan")) == pytest.approx(0.3)
    assert math.isnan(combine_log_halfwidths())
    with pytest.raises(Exception, match="coverage"):
        SplitConformal(1.5).fit([1.0], [1.0])


def test_min_calibration_groups_is_where_the_finite_sample_level_reaches_one() -> None:
    assert [min_calibration_groups(c) for c in (0.5, 0.8, 0.9, 0.95)] == [1, 4, 9, 19]
    for c in (0.8, 0.9, 0.95):
        n = min_calibration_groups(c)
        assert math.ceil((n + 1) * c) <= n and math.ceil(n * c) > n - 1  # n works, n - 1 does not


def test_strata_pool_only_where_a_stratum_has_too_few_groups() -> None:
    """With ``strata``, a held-out group calibrates on its stratum's other groups when they are enough for the
    nominal level, else on every stratum's; groups of two strata with the same label stay apart."""
    rng = np.random.default_rng(3)
    big, small = np.repeat(np.arange(12), 30), np.repeat(np.arange(3), 30)  # 12 and 3 groups; labels 0-2 overlap
    t, p = _draw(rng, len(big) + len(small), 0.3)
    groups = np.concatenate([big, small])
    strata = np.array(["big"] * len(big) + ["small"] * len(small))
    cov = grouped_coverage(t, p, groups, 0.9, finite_sample=False, strata=strata)
    assert cov["groups"] == 15 and cov["pooled_groups"] == 3
    mask, pooled = calibration_mask(groups, strata, (strata == "small") & (groups == 0), 0.9)
    assert pooled and mask.sum() == len(groups) - 30
    mask, pooled = calibration_mask(groups, strata, (strata == "big") & (groups == 0), 0.9)
    assert not pooled and mask.sum() == len(big) - 30 and not mask[len(big):].any()
    # a big stratum's interval is the one it gets alone
    alone = grouped_coverage(t[: len(big)], p[: len(big)], big, 0.9, finite_sample=False)
    assert np.allclose(cov["log_halfwidths"][: len(big)], alone["log_halfwidths"])


def test_pooled_coverage_row_counts_every_held_out_row() -> None:
    """The `all` row of the predict coverage table is covered rows / rows over the families (a small family
    weighs by its rows, not as one third), each row checked against its own family's interval."""
    import pandas as pd

    from traintime.chronos.roofline_calibration import (
        ALL_FAMILIES,
        _coverage_rows,
        pooled_rows,
    )

    rng = np.random.default_rng(2)
    rows, hits = [], 0
    for fam, n, sigma in (("CNN", 600, 0.1), ("MLP", 60, 0.8)):
        t, p = _draw(rng, n, sigma)
        g = rng.integers(0, 6, n)
        rows += _coverage_rows("epochs", fam, t, p, g, 0.9, {"against": "epochs_measured"})
        hits += grouped_coverage(t, p, g, 0.9, finite_sample=False)["covered"]
    table = pooled_rows(pd.DataFrame(rows))
    pooled = table[(table["family"] == ALL_FAMILIES) & (table["variant"] == "empirical quantile")].iloc[0]
    assert pooled["rows"] == 660 and pooled["groups"] == 12
    assert pooled["measured_coverage"] == pytest.approx(hits / 660)
    assert list(table["family"]) == ["CNN", "CNN", "MLP", "MLP", ALL_FAMILIES, ALL_FAMILIES]
    assert "covered" not in table.columns


def test_seed_spread_floors_the_epoch_interval_and_is_never_counted_twice() -> None:
    """Residuals of single-seed labels already hold one seed draw: the seed half-width only floors them."""
    assert seed_floored_halfwidth(0.4, 0.3) == pytest.approx(0.4)  # quadrature would give 0.5
    assert seed_floored_halfwidth(0.2, 0.3) == pytest.approx(0.3)
    assert seed_floored_halfwidth(0.2, float("nan")) == pytest.approx(0.2)
    assert math.isnan(seed_floored_halfwidth(float("nan"), 0.3))


def test_floored_interval_keeps_nominal_coverage_where_quadrature_over_covers() -> None:
    """Labels = truth x model error x seed noise (one draw each), as the released runs: the residual interval
    holds ~90 %; widening it in quadrature by the known seed sd over-covers; flooring it does not."""
    rng = np.random.default_rng(3)
    n, s_model, s_seed = 40_000, 0.15, 0.25
    r = rng.normal(0, s_model, n) + rng.normal(0, s_seed, n)  # log residual of one single-seed label
    cal, test = r[: n // 2], r[n // 2:]
    h = float(np.quantile(np.abs(cal), 0.9))
    z = 1.6448536269514722
    floored, quadrature = seed_floored_halfwidth(h, z * s_seed), combine_log_halfwidths(h, z * s_seed)
    assert abs(float(np.mean(np.abs(test) <= floored)) - 0.9) < 0.01
    assert float(np.mean(np.abs(test) <= quadrature)) > 0.96


def test_predict_epochs_interval_pools_families_with_too_few_models(tmp_path) -> None:
    """`traintime predict`'s epochs interval: a family with 10 models is calibrated on its own residuals, one with
    3 (fewer than 9) on every family's, and the note says so."""
    import pandas as pd

    from traintime.predict_plan import epochs_conformal

    rng = np.random.default_rng(4)
    fams = ["CNN"] * 200 + ["MLP"] * 60
    models = [f"c{i % 10}" for i in range(200)] + [f"m{i % 3}" for i in range(60)]
    t, p = _draw(rng, 260, 0.3)
    t[200:] *= 3.0  # MLP residuals are larger: pooling narrows its interval, so the two rules differ
    (tmp_path / "convergence_predictions").mkdir()
    pd.DataFrame({"protocol": "lomo", "family": fams, "model": models, "epochs_measured": t,
                  "epochs_predicted": p}).to_csv(
        tmp_path / "convergence_predictions" / "m.csv", index=False)
    q_cnn, _, note_cnn, _ = epochs_conformal(tmp_path, "m", "CNN", 0.9)
    q_mlp, _, note_mlp, mlp_mape = epochs_conformal(tmp_path, "m", "MLP", 0.9)
    own = SplitConformal(0.9, finite_sample=False)
    assert q_cnn == pytest.approx(own.fit(t[:200], p[:200], models[:200]).log_halfwidth)
    assert "every family" not in note_cnn and "(10 models)" in note_cnn
    groups = [f"{f}/{m}" for f, m in zip(fams, models)]
    assert q_mlp == pytest.approx(own.fit(t, p, groups).log_halfwidth)
    assert q_mlp != pytest.approx(own.fit(t[200:], p[200:], models[200:]).log_halfwidth)
    assert "(13 models, every family's: fewer than 9 models of MLP)" in note_mlp
    assert mlp_mape == pytest.approx(100 * np.mean(np.abs(t[200:] - p[200:]) / t[200:]))  # the family's own error
