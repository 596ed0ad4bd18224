"""The grouped evaluation of the step models never fits on the held-out group (spy), on synthetic rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.efficiency_step import EfficiencyStepTime
from traintime.chronos.neighbour_step import NeighbourStepTime
from traintime.predict_step_grouped import (
    both_sources,
    generation,
    largest_batch,
    protocols,
    step_grouped_eval,
    summarise_folds,
    summarise_grouped,
    wins,
)

FITS: list[pd.DataFrame] = []


class SpyEfficiency(EfficiencyStepTime):
    """Records every training frame it is fitted on."""

    def fit(self, rows, y_ms, sample_weight=None):  # type: ignore[override]
        FITS.append(rows.copy())
        return super().fit(rows, y_ms, sample_weight)


class SpyNeighbour(NeighbourStepTime):
    """Records every training frame it is fitted on (in the same list: fits alternate with the efficiency spy's)."""

    def fit(self, rows, y_ms, sample_weight=None):  # type: ignore[override]
        FITS.append(rows.copy())
        return super().fit(rows, y_ms, sample_weight)


def _rows(source_gpus: list[str], models: list[str], rng: np.random.Generator) -> pd.DataFrame:
    """Synthetic step rows (labelled synthetic: no measurement) with a made-up measured time."""
    recs = []
    for gi, gpu in enumerate(source_gpus):
        for mi, model in enumerate(models):
            for batch in (16, 64):
                recs.append({"model": model, "family": "CNN", "input_px": 224, "batch_size": batch, "precision": "32",
                             "gpu": gpu, "flops_train_per_batch": 1e9 * (mi + 1) * batch,
                             "param_bytes": 1e7 * (mi + 1), "grad_bytes": 1e7 * (mi + 1),
                             "optimizer_state_bytes": 0.0, "act_bytes_per_sample": 1e6, "layers": 50.0,
                             "fp32_gflops": 1e4 * (gi + 1), "fp16_gflops": 2e4 * (gi + 1),
                             "memory_bandwidth_gbps": 300.0 * (gi + 1)})
    d = pd.DataFrame(recs)
    d["measured_ms"] = d["flops_train_per_batch"] / d["fp32_gflops"] / 1e6 / 0.3 * rng.uniform(0.9, 1.1, len(d))
    return d


def test_generation_from_rtx_series() -> None:
    assert [generation(g) for g in ("GeForce RTX 3090", "RTX 4060 Ti", "RTX 5090", "T4")] == \
        ["Ampere", "Ada", "Blackwell", "other"]


def test_grouped_evaluation_never_fits_on_the_held_out_group() -> None:
    rng = np.random.default_rng(0)
    traces = _rows(["RTX 3080", "RTX 3090", "RTX 4080", "RTX 4090", "RTX 5080"], ["m1", "m2", "m3", "m4"], rng)
    chronos = _rows(["T4", "V100", "A100"], ["m1", "c2", "c3"], rng)
    chronos["dataset"] = np.where(chronos["batch_size"] == 16, "d16", "d64")  # synthetic dataset names
    FITS.clear()
    summary, pred = step_grouped_eval(traces, chronos, None, factory=SpyEfficiency, neighbour_factory=SpyNeighbour)
    data = both_sources(traces, chronos)
    folds = [(p, g, test) for p, _, fs in protocols(data) for g, _, test in fs]
    # per fold and learned model (efficiency, neighbour): one fit on both sources (not for the external protocol),
    # one on CHRONOS only on CHRONOS LOGO and the external protocol
    # (and on the largest-batch protocols two more: the neighbour model with the network and the global batch edge;
    # on the smallest-batch ones one: the global edge)
    n_fits = {p: 4 if p == "chronos LOGO" else 4 if p.endswith("largest batch") else 3 if p.endswith("smallest batch")
              else 2 for p, _, _ in folds}
    assert len(FITS) == sum(n_fits[p] for p, _, _ in folds)
    i = 0
    for proto, group, test in folds:
        n = n_fits[proto]
        col = {"traces LOGO": "gpu", "chronos LOGO": "gpu", "traces LOMO": "model", "traces LOGenO": "generation",
               "chronos LOMO": "model", "chronos LODO": "dataset"}
        for fit in FITS[i:i + n]:
            if proto in col:
                key = fit["gpu"].map(generation) if col[proto] == "generation" else fit[col[proto]]
                assert group not in set(key.astype(str)), (proto, group)
                if proto == "chronos LODO":  # the traces, which name no dataset, stay in the training part
                    assert fit["dataset"].isna().sum() == len(traces)
            elif proto.endswith("batch"):  # no row of a held-out (network, largest / smallest batch) is fitted on
                held = data[test]
                assert held["batch_size"].eq(64 if proto.endswith("largest batch") else 16).all() and len(held)
                key = ["source", "model", "gpu", "batch_size"]
                assert not set(map(tuple, fit[key].to_numpy())) & set(map(tuple, held[key].to_numpy())), proto
            else:  # external: fitted on CHRONOS GPUs only
                assert not set(fit["gpu"]) & set(traces["gpu"])
        i += n
        assert set(pred.loc[(pred["protocol"] == proto) & (pred["fold"] == group), "row"]) == set(np.flatnonzero(test))
    # every protocol scores every row of its source once per method
    eff = pred[(pred["method"] == "efficiency") & (pred["protocol"] == "traces LOGO")]
    assert sorted(eff["row"]) == list(range(len(traces)))
    for proto in ("chronos LOMO", "chronos LODO"):
        scored = pred[(pred["method"] == "roofline_calibrated") & (pred["protocol"] == proto)]
        assert sorted(scored["row"]) == list(range(len(traces), len(data)))
    assert set(pred.loc[pred["protocol"] == "chronos LODO", "fold"]) == {"d16", "d64"}
    assert {"efficiency", "neighbour", "roofline_assumed", "roofline_calibrated", "efficiency_chronos_only",
            "neighbour_chronos_only", "neighbour_network_edge", "neighbour_global_edge"} <= set(summary["method"])
    for variant in ("neighbour_network_edge", "neighbour_global_edge"):
        edge = summary[summary["method"] == variant]
        assert set(edge["protocol"]) == ({"traces largest batch", "chronos largest batch"} | (
            {"traces smallest batch", "chronos smallest batch"} if variant == "neighbour_global_edge" else set()))
    assert isinstance(wins(summary), bool) and isinstance(wins(summary, new="neighbour"), bool)


def _fitted_efficiency():
    from test_efficiency_step import synthetic_rows, true_law

    rows = synthetic_rows(300, np.random.default_rng(3), (9.0, 13.0))
    return EfficiencyStepTime(trained_on="SYNTHETIC test rows").fit(rows, true_law(rows))


def _fitted_neighbour():
    from test_neighbour_step import GPUS, synthetic_rows, true_ms

    rows = synthetic_rows(list(range(6)), list(GPUS))
    return NeighbourStepTime(trained_on="SYNTHETIC test rows").fit(rows, true_ms(rows))


@pytest.mark.parametrize("name,fitted", [("efficiency", _fitted_efficiency), ("neighbour", _fitted_neighbour)])
def test_predict_with_a_frozen_model_names_it_and_ranks_a100_faster_than_t4(tmp_path, name, fitted) -> None:
    import io
    import json

    from traintime.cli import build_parser
    from traintime.predict_run import run_predict

    (tmp_path / "m" / "steptime").mkdir(parents=True)
    (tmp_path / "d").mkdir()
    doc = {**fitted().to_json(), "conformal": {"coverage": 0.9, "step_log_halfwidth": 0.2, "groups": 5}}
    (tmp_path / "m" / "steptime" / f"{name}_model.json").write_text(json.dumps(doc))
    base = ["predict", "--model", "resnet50", "--dataset", "imagenet", "--no-probe", "--gpus", "T4,A100-PCIe-80GB",
            "--models-dir", str(tmp_path / "m"), "--data-dir", str(tmp_path / "d"), "--step-model", name]
    out = io.StringIO()
    run_predict(build_parser().parse_args(base), out=out)
    assert f"step-time model (--step-model {name})" in out.getvalue()
    assert "SYNTHETIC test rows" in out.getvalue()
    out = io.StringIO()
    run_predict(build_parser().parse_args(base + ["--json"]), out=out)
    recs = {r["gpu"]: r for r in json.loads(out.getvalue())}
    assert recs["A100-PCIe-80GB"]["step_ms"] < recs["T4"]["step_ms"]
    assert recs["T4"]["step_ms_low"] < recs["T4"]["step_ms"] < recs["T4"]["step_ms_high"]


@pytest.mark.parametrize("won,used", [(True, "neighbour"), (False, "roofline")])
def test_auto_uses_neighbour_only_when_its_file_records_the_rule_met(tmp_path, won, used) -> None:
    import json

    from traintime.core.gpudb import gpu_database
    from traintime.predict_run import default_step_model

    (tmp_path / "steptime").mkdir()
    doc = {**_fitted_neighbour().to_json(), "wins_grouped": won,
           "conformal": {"coverage": 0.9, "step_log_halfwidth": 0.2, "groups": 5}}
    (tmp_path / "steptime" / "neighbour_model.json").write_text(json.dumps(doc))
    _, _, notes = default_step_model(tmp_path, tmp_path, "CNN", gpu_database(None), 0.9, None, "auto")
    assert notes[0].startswith(f"step-time model chosen by --step-model auto: {used} (")
    assert notes[1].startswith(f"step-time model (--step-model {used})")


@pytest.mark.parametrize("name", ["efficiency", "neighbour"])
def test_frozen_step_model_missing_file_is_one_line(tmp_path, name) -> None:
    from traintime.core.errors import DataUnavailableError
    from traintime.core.gpudb import gpu_database
    from traintime.predict_run import default_step_model

    with pytest.raises(DataUnavailableError, match=f"{name}_model.json") as exc:
        default_step_model(tmp_path, tmp_path, "CNN", gpu_database(None), 0.9, None, name)
    assert "\n" not in str(exc.value)


def test_leave_one_generation_out_chooses_the_hardware_terms_by_inner_folds_of_generations() -> None:
    from traintime.chronos.neighbour_step import NestedNeighbourStepTime
    from traintime.predict_step_grouped import grouped_predictions

    groups: list[tuple[str, frozenset[str]]] = []

    class SpyNested(NestedNeighbourStepTime):
        """Records the inner grouping and the generations of the rows it is fitted on."""

        def fit(self, rows, y_ms, sample_weight=None):  # type: ignore[override]
            groups.append((self.inner_group, frozenset(rows["generation"])))
            return super().fit(rows, y_ms, sample_weight)

    rng = np.random.default_rng(1)
    traces = _rows(["RTX 3080", "RTX 3090", "RTX 4080", "RTX 4090", "RTX 5080", "RTX 5090"],
                   [f"m{i}" for i in range(1, 7)], rng)
    chronos = _rows(["T4", "V100", "A100"], ["c1", "c2", "c3"], rng)
    data = both_sources(traces, chronos)
    pred = grouped_predictions(data, None, factory=SpyEfficiency, neighbour_factory=SpyNested)
    by_generation = [g for grp, g in groups if grp == "generation"]
    assert len(by_generation) == 3  # one fit per held-out generation, each without it
    assert sorted(len({"Ampere", "Ada", "Blackwell"} - g) for g in by_generation) == [1, 1, 1]
    assert all(grp == "gpu" for grp, g in groups if g >= {"Ampere", "Ada", "Blackwell"})  # every other protocol
    # the wall time of every outer-fold fit is kept (issue 13's benchmark): one per fold the neighbour model was
    # fitted on, none for the assumed roofline (nothing fitted)
    fit_s = pred.attrs["fit_s"]
    folds = pred[pred["method"] == "neighbour"].groupby("protocol")["fold"].nunique()
    assert {p: len(fit_s[(p, "neighbour")]) for p in folds.index} == folds.to_dict()
    assert all(t >= 0 for times in fit_s.values() for t in times)
    summary = summarise_grouped(data, pred)
    assert summary.loc[summary["method"] == "neighbour", "fit_s_mean"].notna().all()
    assert summary.loc[summary["method"] == "roofline_assumed", "fit_s_mean"].isna().all()


def test_fold_breakdown_by_hand() -> None:
    data = pd.DataFrame({"family": ["CNN", "CNN", "MLP", "CNN"], "measured_ms": [10.0, 20.0, 5.0, 8.0]})
    pred = pd.DataFrame({"protocol": ["chronos LOGO"] * 3 + ["traces LOMO"], "fold": ["T4", "T4", "T4", "m1"],
                         "method": "neighbour", "row": [0, 1, 2, 3], "pred_ms": [20.0, 10.0, 5.0, 8.0]})
    t = summarise_folds(data, pred)
    assert list(t["family"]) == ["CNN", "MLP"]  # traces LOMO is not a GPU protocol: left out
    cnn = t.iloc[0]
    assert cnn["rows"] == 2 and cnn["mape_pct"] == pytest.approx(75.0) and cnn["median_ape_pct"] == pytest.approx(75.0)
    assert cnn["geo_mean_pred_over_measured"] == pytest.approx(1.0)  # 2x and 0.5x
    assert t.iloc[1]["mape_pct"] == 0.0


def test_largest_batch_marks_each_networks_largest_batch_once_measured_at_several() -> None:
    data = pd.DataFrame({"source": ["traces"] * 5 + ["chronos"] * 4,
                         "model": ["a", "a", "a", "b", "a", "a", "a", "t", "t"],
                         "input_px": [224, 224, 224, 224, 128, 224, 224, np.nan, np.nan], "precision": ["32"] * 9,
                         "batch_size": [16, 64, 64, 64, 16, 32, 128, 8, 32]})
    # a@224 traces: both batch-64 rows (two GPUs); b: one batch only; a@128: one batch only; chronos a: its 128;
    # a network that names no input size (the release's DistilBERT rows) is still one network: its 32
    assert largest_batch(data).tolist() == [False, True, True, False, False, False, True, False, True]


def test_max_folds_keeps_the_first_folds_of_each_protocol_only() -> None:
    """The tests-only knob (predict_public_eval.test_only.max_outer_folds): the first folds in sorted group order."""
    rng = np.random.default_rng(0)
    data = both_sources(_rows(["RTX 3080", "RTX 3090", "RTX 4080", "RTX 4090"], ["m1", "m2", "m3"], rng),
                        _rows(["T4", "V100", "A100"], ["m1", "c2"], rng))
    full = {p: [g for g, _, _ in fs] for p, _, fs in protocols(data)}
    cut = {p: [g for g, _, _ in fs] for p, _, fs in protocols(data, 2)}
    assert full["traces LOGO"] == ["RTX 3080", "RTX 3090", "RTX 4080", "RTX 4090"]
    assert cut["traces LOGO"] == ["RTX 3080", "RTX 3090"] and cut["chronos LOGO"] == ["A100", "T4"]
    assert all(cut[p] == full[p][:2] for p in full)


def test_markdown_says_when_only_the_first_folds_were_scored() -> None:
    from traintime.predict_step_grouped import markdown_grouped

    summary = pd.DataFrame([{"protocol": "traces LOGO", "method": "neighbour", "rows": 4, "folds": 2, "gpus": 2,
                             "models": 2, "mape_pct": 10.0, "median_ape_pct": 8.0, "pairs_right_pct": 90.0,
                             "geo_mean_pred_over_measured": 1.0}])
    cov = pd.DataFrame(columns=["quantity", "variant", "rows", "groups", "nominal_coverage", "measured_coverage",
                                "interval_factor_all_groups"])
    frozen = {"efficiency": {"wins_grouped": False}, "neighbour": {"wins_grouped": True}}
    full = markdown_grouped(summary, cov, [], frozen).splitlines()
    cut = markdown_grouped(summary, cov, [], frozen, max_folds=3).splitlines()
    assert "TEST CONFIGURATION" not in "\n".join(full)
    assert cut[0] == full[0] and cut[2].startswith("**TEST CONFIGURATION") and "first 3 outer folds" in cut[2]
    assert cut[4:] == full[2:]  # the label and its blank line, nothing else


def test_leave_one_input_size_out_holds_out_a_size_everywhere() -> None:
    rng = np.random.default_rng(4)
    tr = _rows(["RTX 3060", "RTX 4090"], ["m0", "m1"], rng)
    ch = _rows(["A100", "T4"], ["c0"], rng).assign(input_px=64)
    data = both_sources(pd.concat([tr, tr.assign(input_px=64), tr.assign(input_px=128)], ignore_index=True), ch)
    loso = {p: folds for p, _, folds in protocols(data)}["traces LOSO"]
    assert [g for g, _, _ in loso] == ["64", "128", "224"]  # by value, not as text
    src = data["source"].to_numpy()
    for g, train, test in loso:
        assert set(data.loc[test, "img_px"]) == {int(g)} and set(data.loc[test, "source"]) == {"traces"}
        assert not (train & (src == "traces") & (data["img_px"] == int(g)).to_numpy()).any()
        # a size never measured anywhere: the CHRONOS rows of that size leave the training part too
        assert (train & (src == "chronos")).sum() == (0 if g == "64" else (src == "chronos").sum())
    one_size = both_sources(tr, ch)
    assert "traces LOSO" not in {p for p, _, _ in protocols(one_size)}


def test_errors_by_size_splits_the_trace_protocols_by_input_size() -> None:
    from traintime.predict_step_grouped import errors_by_size

    rng = np.random.default_rng(5)
    tr = _rows(["RTX 3060", "RTX 4090"], ["m0"], rng)
    data = both_sources(pd.concat([tr.assign(input_px=224), tr.assign(input_px=64)], ignore_index=True),
                        _rows(["A100"], ["c0"], rng))
    n = len(tr)
    pred = pd.DataFrame({"protocol": "traces LOGO", "fold": "g", "method": "m", "row": np.arange(2 * n),
                         "pred_ms": data["measured_ms"].to_numpy()[:2 * n] * np.r_[np.full(n, 1.5), np.full(n, 1.0)]})
    out = errors_by_size(data, pred)
    assert out["img_px"].tolist() == [64, 224] and out["rows"].tolist() == [n, n]
    np.testing.assert_allclose(out["mape_pct"], [0.0, 50.0])


def test_lomo_model_groups_score_every_model_once_never_fitted_on() -> None:
    """predict_public_eval.lomo_model_groups: groups of trace models held out, each model in exactly one test fold,
    its CHRONOS rows of the same name out of that fold's training part; null (None) is one model per fold."""
    from traintime.core.errors import ConfigError
    from traintime.predict_step_grouped import model_group

    rng = np.random.default_rng(5)
    models = [f"m{i}" for i in range(7)]
    data = both_sources(_rows(["RTX 3080", "RTX 4090"], models, rng), _rows(["T4", "A100"], ["m1", "c2"], rng))
    per_model = {p: fs for p, _, fs in protocols(data)}["traces LOMO"]
    grouped = {p: fs for p, _, fs in protocols(data, model_groups=3)}["traces LOMO"]
    assert [g for g, _, _ in per_model] == models
    assert [g for g, _, _ in grouped] == ["models 1/3", "models 2/3", "models 3/3"]
    tested = [set(data.loc[test, "model"]) for _, _, test in grouped]
    assert tested == [{"m0", "m3", "m6"}, {"m1", "m4"}, {"m2", "m5"}]  # names in order, dealt round-robin
    for (_, train, test), held in zip(grouped, tested):
        assert set(data.loc[test, "source"]) == {"traces"}
        assert not set(data.loc[train, "model"]) & held  # m1's CHRONOS rows leave with it
    assert (data.loc[grouped[1][1], "model"] == "c2").any()  # a CHRONOS-only model is never held out
    assert {p: len(fs) for p, _, fs in protocols(data, model_groups=7)} == {p: len(fs) for p, _, fs in protocols(data)}
    with pytest.raises(ConfigError, match="lomo_model_groups = 1"):
        model_group(data["model"].to_numpy(), (data["source"] == "traces").to_numpy(), 1)


def test_model_protocols_hold_a_chronos_model_out_with_its_traced_twin() -> None:
    """The release's DeiT-Tiny is timm's deit_tiny_patch16_224: leave-one-model-out on either source removes both."""
    rng = np.random.default_rng(6)
    data = both_sources(_rows(["RTX 3080", "RTX 4090"], ["deit_tiny_patch16_224", "mixer_b16_224"], rng),
                        _rows(["T4", "A100"], ["DeiT-Tiny", "mixer"], rng))
    folds = {p: {g: (train, test) for g, train, test in fs} for p, _, fs in protocols(data)}
    # one model_id per model across the sources: the unit of the inner by-model folds too
    assert set(data.loc[data["model"].isin(["DeiT-Tiny", "deit_tiny_patch16_224"]), "model_id"]) == {"deit_tiny_patch16_224"}
    assert set(data.loc[data["model"] == "mixer", "model_id"]) == {"mixer"}
    train, test = folds["chronos LOMO"]["DeiT-Tiny"]
    assert set(data.loc[test, "model"]) == {"DeiT-Tiny"}
    assert not set(data.loc[train, "model"]) & {"DeiT-Tiny", "deit_tiny_patch16_224"}
    train, _ = folds["traces LOMO"]["deit_tiny_patch16_224"]
    assert not set(data.loc[train, "model"]) & {"DeiT-Tiny", "deit_tiny_patch16_224"}
    # the release's mixer (width 128-256, depth 8-10) is another model than Mixer-B/16: it stays
    train, _ = folds["chronos LOMO"]["mixer"]
    assert "mixer_b16_224" in set(data.loc[train, "model"])


def test_interior_batches_lie_strictly_between_the_fitted_ones() -> None:
    from traintime.predict_step_grouped import interior_batches

    traces = pd.DataFrame({"batch_size": [16, 32, 64, 8, 128, 32]})
    assert interior_batches(traces, [16, 64]) == [32]
    assert interior_batches(traces, [16, 32, 64]) == []
    assert interior_batches(traces, [64]) == []


def test_smallest_batch_protocols_hold_out_each_networks_smallest_measured_batch() -> None:
    rng = np.random.default_rng(6)
    data = both_sources(_rows(["RTX 3080", "RTX 4090"], ["m1", "m2"], rng), _rows(["T4", "A100"], ["c1"], rng))
    folds = {p: fs for p, _, fs in protocols(data)}
    for src in ("traces", "chronos"):
        (_, train, test), = folds[f"{src} smallest batch"]
        assert set(data.loc[test, "batch_size"]) == {16} and set(data.loc[test, "source"]) == {src}
        assert not (train & test).any() and (train | test).all()
    np.testing.assert_array_equal(largest_batch(data, "min"), (data["batch_size"] == 16).to_numpy())
