"""CHRONOS iteration time: feature sets, estimators, protocols (no leakage) and the saved model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from traintime.chronos.estimators import (
    ESTIMATORS,
    IterationTimePredictor,
    ReplicateMedian,
    load_iteration_model,
    make_estimator,
)
from traintime.chronos.evaluation import (
    PROTOCOLS,
    PaperRandomSplit,
    evaluate_family,
    protocol_splits,
    train_iteration_predictor,
)
from traintime.chronos.features import (
    CleanFeatures,
    PaperFeatures,
    make_feature_builder,
    vocabulary,
)
from traintime.chronos.iteration_tables import (
    grouped_summary,
    grouped_table,
    load_reference,
    per_model_rmse_table,
    regressors_table,
)
from traintime.core.errors import SchemaError, UnknownNameError
from traintime.core.specs import load_specs
from traintime.data.chronos import FAMILIES, ITERATION, normalise_iteration

REL = "chronos/epoch_time_prediction/data"


@pytest.fixture(scope="module")
def table(mirror):
    return normalise_iteration({f: mirror / REL / f"{f}.csv" for f in FAMILIES})


def family_rows(table, family):
    return table[table["family"] == family].sort_values("raw_row").reset_index(drop=True)


# --- protocols -------------------------------------------------------------------------------------
def test_paper_split_matches_train_test_split_twice():
    X = np.arange(3840)
    tr, te = next(PaperRandomSplit(random_state=42).split(X))
    rem, te_ref = train_test_split(X, test_size=0.1, random_state=42, shuffle=True)
    tr_ref, _ = train_test_split(rem, test_size=1 / 9, random_state=42, shuffle=True)
    assert np.array_equal(te, te_ref) and np.array_equal(tr, tr_ref)  # order matters for XGBoost
    assert (len(tr), len(te)) == (3072, 384)


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_protocols_never_leak(table, protocol):
    group_col = PROTOCOLS[protocol].group_column
    n_folds = 0
    for family in FAMILIES:
        rows = family_rows(table, family)
        for seed in (42, 1):
            for fold, tr, te in protocol_splits(protocol, rows, seed):
                assert len(te) > 0 and len(tr) > 0
                assert not set(tr) & set(te), f"{protocol} {family} {fold}: a test row is in training"
                if protocol != "random":
                    # the learning-rate replicates of a test row never are in training
                    assert not set(rows["config_key"].iloc[tr]) & set(rows["config_key"].iloc[te])
                if group_col is not None:
                    assert not set(rows[group_col].iloc[tr]) & set(rows[group_col].iloc[te])
                if seed == 42:
                    n_folds += 1
    expected = {"random": 3, "grouped_random": 3, "lomo": 10, "lodo": 12, "logo": 30}[protocol]
    assert n_folds == expected


def test_random_split_does_leak_replicates(table):
    rows = family_rows(table, "CNN")
    _, tr, te = protocol_splits("random", rows, 42)[0]
    shared = set(rows["config_key"].iloc[tr]) & set(rows["config_key"].iloc[te])
    assert len(shared) > 300  # the released protocol's replicate leak, which grouped_random removes


def test_unknown_protocol():
    with pytest.raises(UnknownNameError, match="unknown protocol 'lgo'; did you mean: logo"):
        protocol_splits("lgo", pd.DataFrame({"a": [1]}))


# --- feature sets ---------------------------------------------------------------------------------
def test_paper_features_keep_the_leak_clean_never(table):
    leaky = set(ITERATION.target_derived) | {"step_time_ms"}
    for family in FAMILIES:
        rows = family_rows(table, family)
        paper = PaperFeatures(family, categories=vocabulary(rows)).fit(rows)
        noleak = make_feature_builder("paper_noleak", family).fit(rows)
        clean = CleanFeatures(family).fit(rows)
        assert ("loader_ratio" in paper.feature_names_) == (family in ("CNN", "Transformer"))
        assert "learning_rate" in paper.feature_names_
        assert not leaky & set(paper.feature_names_) - {"loader_ratio"}
        assert not leaky & set(noleak.feature_names_)
        assert not leaky & set(clean.feature_names_) and not leaky & set(clean.required_columns_)
        assert "learning_rate" not in clean.feature_names_ and "price_per_hour_usd" not in clean.feature_names_
        assert any(c.startswith("optimizer=") for c in clean.feature_names_)
        assert any(c.startswith("model=") for c in clean.feature_names_)
    counts = {f: len(PaperFeatures(f).fit(family_rows(table, f)).feature_names_) for f in FAMILIES}
    assert counts == {"CNN": 57, "MLP": 52, "Transformer": 60}  # the released scripts' matrices
    cnn = PaperFeatures("CNN").fit(family_rows(table, "CNN")).feature_names_
    assert cnn[:4] == ["num_classes", "dataset_size", "learning_rate", "batch_size"]
    assert cnn[-2:] == ["bus=PCIe 4.0", "bus=PCIe 5.0"] and "price_per_hour_usd" not in cnn
    assert "price_per_hour_usd" in PaperFeatures("MLP").fit(family_rows(table, "MLP")).feature_names_


def test_clean_features_predict_any_spec_table_gpu(table):
    rows = family_rows(table, "Transformer")
    clean = CleanFeatures("Transformer").fit(rows)
    specs = load_specs()
    new = rows.head(len(specs)).copy()
    new["gpu"] = list(specs["gpu"])
    X = clean.transform(new)
    assert np.allclose(X["fp32_gflops"], specs["fp32_gflops"].to_numpy())
    # a text model held out (LOMO): columns empty by design for it must not stop the prediction
    vision = rows[rows["input_px"].notna()]
    text = rows[rows["input_px"].isna()]
    held = CleanFeatures("Transformer").fit(vision)
    assert "input_px" in held.feature_names_ and "input_px" not in held.required_columns_
    assert held.transform(text)["input_px"].isna().all()
    bad = rows.head(1).assign(gpu="Voodoo 5")
    with pytest.raises(UnknownNameError, match="unknown GPU 'Voodoo 5'"):
        clean.transform(bad)
    with pytest.raises(SchemaError, match="lack column\\(s\\) d_model"):
        clean.transform(rows.drop(columns=["d_model"]))


def test_shared_rows_gives_the_features_of_the_direct_path(table, monkeypatch):
    """Inside shared_rows, the clean features of row subsets (folds) come from one build over the whole frame: the
    same frames as built row by row; other frames and a GPU unknown outside the asked rows take the direct path."""
    from traintime.chronos import features as feats
    from traintime.chronos.features import CleanRooflineFeatures, shared_rows

    rows = family_rows(table, "Transformer")
    text = rows["input_px"].isna().to_numpy()
    folds = [rows.iloc[np.flatnonzero(~text)], rows.iloc[np.flatnonzero(text)], rows.iloc[::7], rows.head(1)]
    direct = [[cls("Transformer").fit(f).transform(g) for g in folds] for cls in (CleanFeatures, CleanRooflineFeatures)
              for f in folds[:3]]
    calls = []
    build = CleanFeatures._transform

    def counted(self, r, specs):
        calls.append(len(r))
        return build(self, r, specs)

    monkeypatch.setattr(feats.CleanFeatures, "_transform", counted)
    with shared_rows(rows):
        shared = [[cls("Transformer").fit(f).transform(g) for g in folds]
                  for cls in (CleanFeatures, CleanRooflineFeatures) for f in folds[:3]]
        other = CleanFeatures("Transformer").fit(rows).transform(rows.head(3).copy().assign(extra=1))
    monkeypatch.undo()
    for d_row, s_row in zip(direct, shared):
        for d, s in zip(d_row, s_row):
            pd.testing.assert_frame_equal(d, s, check_exact=True)
    # one build of the whole frame per fitted state (the vision, text and mixed folds have different columns), shared
    # by both feature sets; the frame with another column is built directly
    states = {CleanFeatures("Transformer").fit(f)._state_key() for f in folds[:3]}
    assert len(states) == 3 and calls.count(len(rows)) == len(states) and calls[-1] == 3
    assert other.shape[0] == 3
    fitted = CleanFeatures("Transformer").fit(rows)
    reset = rows.iloc[1::5].reset_index(drop=True)  # a fold with a new index, as the inner selection makes
    changed = rows.iloc[1::5].copy()
    changed["batch_size"] *= 2  # the same row ids with other values
    with shared_rows(rows):
        for g in (reset, changed):
            pd.testing.assert_frame_equal(fitted.transform(g), fitted._transform(g, None), check_exact=True)
    assert not fitted.transform(changed).equals(fitted.transform(rows.iloc[1::5]))
    bad = rows.copy()
    bad.loc[bad.index[-1], "gpu"] = "Voodoo 5"  # only outside the asked rows
    with shared_rows(bad):
        got = CleanFeatures("Transformer").fit(bad.head(50)).transform(bad.head(50))
        pd.testing.assert_frame_equal(got, CleanFeatures("Transformer").fit(rows.head(50)).transform(rows.head(50)))
        with pytest.raises(UnknownNameError, match="unknown GPU 'Voodoo 5'"):
            CleanFeatures("Transformer").fit(bad.head(50)).transform(bad.tail(2))


def test_clean_roofline_extrapolates_an_efficiency_law_and_clean_does_not(table):
    """Step time = 3 x ideal FP32 compute time: trained on the cheaper half of the configurations,
    the roofline target predicts the dearer half (unseen FLOP range); the plain log target cannot."""
    from traintime.chronos.evaluation import build_model
    from traintime.core.errors import TraintimeError

    rows = family_rows(table, "CNN")
    flops = rows["flops_train_per_sample"].to_numpy(float) * rows["batch_size"].to_numpy(float)
    fp32 = CleanFeatures("CNN").fit(rows)._gpu_specs(rows, load_specs())["fp32_gflops"].to_numpy()
    y = 3.0 * flops / (fp32 * 1e6)
    cheap = flops <= np.median(flops)
    tr, te = rows[cheap], rows[~cheap]
    ape = {}
    for fs in ("clean", "clean_roofline"):
        m = build_model(fs, "xgboost", "CNN", 42, categories=vocabulary(rows), n_estimators_scale=0.1,
                        clean_options={"log_target": True})
        pred = m.fit(tr, y[cheap]).predict(te)
        ape[fs] = float(np.mean(np.abs(pred - y[~cheap]) / y[~cheap]) * 100)
    assert ape["clean_roofline"] < 1.0 and ape["clean"] > 20.0
    with pytest.raises(TraintimeError, match="needs log_target"):
        build_model("clean_roofline", "xgboost", "CNN", 42, clean_options={"log_target": False}).fit(tr, y[cheap])


def test_clean_roofline_leaves_rows_without_gpu_specs_out_of_the_fit_and_predicts_nan_for_them(table):
    """A local CPU row has no GPU specs, so no ideal compute time: it is left out of the fit (the other rows
    still train the model) and gets no prediction, instead of stopping the whole fit."""
    from traintime.chronos.evaluation import build_model
    from traintime.core.errors import SchemaError

    rows = family_rows(table, "MLP").iloc[:400].copy()
    cpu = rows.iloc[:5].copy()
    cpu["gpu"] = "cpu"
    specs = load_specs()
    specs = pd.concat([specs, pd.DataFrame([{"gpu": "cpu"}])], ignore_index=True)
    both = pd.concat([rows, cpu], ignore_index=True)
    m = build_model("clean_roofline", "xgboost", "MLP", 42, categories=vocabulary(both), n_estimators_scale=0.1,
                    clean_options={"log_target": True, "specs": specs})
    pred = m.fit(both).predict(both)
    assert np.isfinite(pred[: len(rows)]).all() and np.isnan(pred[len(rows):]).all()
    with pytest.raises(SchemaError, match="no row has a positive"):
        build_model("clean_roofline", "xgboost", "MLP", 42, categories=vocabulary(cpu), n_estimators_scale=0.1,
                    clean_options={"log_target": True, "specs": specs}).fit(cpu)


# --- estimators -----------------------------------------------------------------------------------
def test_estimator_registry():
    assert set(ESTIMATORS) == {"xgboost", "random_forest", "mlp", "replicate_median"}
    with pytest.raises(UnknownNameError, match="unknown estimator 'xgbost'; did you mean: xgboost"):
        make_estimator("xgbost", "CNN")
    xgb = make_estimator("xgboost", "MLP", seed=7)
    p = xgb.get_params()
    assert (p["n_estimators"], p["subsample"], p["learning_rate"], p["max_depth"], p["colsample_bytree"],
            p["random_state"]) == (700, 0.85, 0.05, 8, 0.9, 7)
    assert make_estimator("xgboost", "Transformer").get_params()["n_estimators"] == 900


def test_replicate_median_levels():
    train = pd.DataFrame({"config_key": ["a", "a", "a", "b"], "model": ["m"] * 4, "dataset": ["d"] * 4,
                          "batch_size": [8] * 4, "precision_bits": [16] * 4, "gpu": ["T4", "T4", "T4", "L4"],
                          "optimizer": ["SGD"] * 4, "param_count": [1] * 4})
    est = ReplicateMedian().fit(train, [1.0, 2.0, 9.0, 5.0])
    test = train.iloc[[0, 3]].copy()
    test.loc[test.index[1], ["config_key", "gpu"]] = ["c", "H100-PCIe"]
    pred = est.predict(test)
    assert pred[0] == 2.0  # median of the configuration's replicates
    assert pred[1] == pytest.approx(3.5)  # other GPUs of (model, dataset, batch, precision, optimizer, width)
    assert est.levels_.tolist() == [0, 2]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fit_predict_smoke_and_saved_model(table, tmp_path):
    small = table.iloc[::20]
    pred = evaluate_family(small, "Transformer", "logo", ["paper", "clean"], ["xgboost", "replicate_median"],
                           [42], n_estimators_scale=0.05, clean_options={"log_target": True})
    assert set(pred["fold"]) == set(small.loc[small.family == "Transformer", "gpu"])
    assert np.isfinite(pred["y_pred_ms"]).all()
    assert len(pred) == 4 * (small["family"] == "Transformer").sum()
    pred_r = evaluate_family(small, "CNN", "random", ["paper"], list(ESTIMATORS), [42, 0], n_estimators_scale=0.05)
    assert set(pred_r["estimator"]) == set(ESTIMATORS) and set(pred_r["seed"]) == {0, 42}
    ref = load_reference()
    allp = pd.concat([pred, pred_r])
    rmse_tab = per_model_rmse_table(allp, ref)
    assert set(rmse_tab["model"]) == set(small.loc[small.family == "CNN", "model"])
    assert rmse_tab["paper_rmse_ms"].notna().all() and (rmse_tab["n_seeds"] == 2).all()
    reg = regressors_table(allp, ref)
    assert len(reg) == 4 + 2 * 2
    assert grouped_table(allp, "logo")["group"].nunique() == 10
    summ = grouped_summary(allp, ref)
    assert set(summ["family"]) == {"Transformer", "ALL"}

    predictor = train_iteration_predictor(small, ["CNN", "Transformer"], "clean", "xgboost", seed=42,
                                          clean_options={"log_target": True}, n_estimators_scale=0.05,
                                          predictions=allp)
    path = tmp_path / "m.joblib"
    predictor.save(path)
    loaded = load_iteration_model(path)
    assert isinstance(loaded, IterationTimePredictor)
    rows = small[small["family"].isin(["CNN", "Transformer"])].head(50)
    assert np.allclose(loaded.predict(rows), predictor.predict(rows))
    meta = loaded.metadata
    assert meta["feature_set"] == "clean" and meta["families"]["CNN"]["training_rows"] == (small.family == "CNN").sum()
    assert "logo" in meta["families"]["Transformer"]["cv"]
    # a GPU of the spec table that CHRONOS never measured
    other = [g for g in load_specs()["gpu"] if g not in set(table["gpu"])]
    if other:
        new = rows.head(3).assign(gpu=other[0])
        assert (loaded.predict(new) > 0).all()
    with pytest.raises(UnknownNameError, match="model family"):
        loaded.predict(rows.assign(family="RNN"))


@pytest.mark.slow
def test_paper_mode_reproduces_the_released_scripts_seed42(table):
    """The released scripts print these per-model RMSEs for seed 42 (xgboost 2.1.1, scikit-learn 1.5.1)."""
    from traintime.core.metrics import rmse

    ref = load_reference()
    released = ref[ref["kind"] == "released_script"].set_index("model")["value"]
    for family in ("CNN", "MLP"):
        pred = evaluate_family(table, family, "random", ["paper"], ["xgboost"], [42])
        for model, g in pred.groupby("model"):
            assert rmse(g["y_true_ms"], g["y_pred_ms"]) == pytest.approx(released[model], abs=0.006), model
