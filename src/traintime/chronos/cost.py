"""End-to-end training time and cost: step time x steps per epoch x epochs, priced per GPU-hour.

The paper's estimate (CHRONOS, "End-to-end estimate")::

    T_total [s] = T_conv x (N / B) x t_iter [s]          cost [USD] = T_total / 3600 x price_per_hour

``N / B`` is used as is (no ceil: a last partial batch counts fractionally; for N = 100,000 and
B = 64 that is 1562.5 instead of 1563 steps, 0.03% less), as the paper and the released predictor
do. Validation passes, data-loader start-up and checkpointing are not counted (the paper's
Limitations say so too).

:func:`end_to_end_table` combines, for one configuration on several GPUs, the predicted step time
and epochs with the measured ones where the released data has them. Columns ending in
``_predicted`` are model outputs; ``_measured`` columns come from the released measurements (the
"measured" total is measured step time x measured T_conv, not a measured wall-clock time: the
release has no end-to-end timing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from traintime.core.errors import ConfigError, SchemaError

#: Columns that identify a configuration on a GPU regardless of the learning rate (which does not
#: change the step time).
STEP_KEYS: tuple[str, ...] = ("model", "dataset", "optimizer", "batch_size", "precision_bits")


@dataclass(frozen=True)
class RunConfig:
    """One training configuration (no GPU): names as in the CHRONOS data."""

    model: str
    dataset: str
    optimizer: str
    batch_size: int
    learning_rate: float
    precision_bits: int

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> "RunConfig":
        """From the ``example:`` config section (extra keys such as ``gpus`` are ignored)."""
        try:
            return cls(model=str(section["model"]), dataset=str(section["dataset"]),
                       optimizer=str(section["optimizer"]), batch_size=int(section["batch_size"]),
                       learning_rate=float(section["learning_rate"]),
                       precision_bits=int(section["precision_bits"]))
        except KeyError as exc:
            raise ConfigError(f"config: example.{exc.args[0]}: missing") from None

    def describe(self) -> str:
        return (f"{self.model} on {self.dataset}, {self.optimizer}, batch {self.batch_size}, "
                f"lr {self.learning_rate:g}, {self.precision_bits}-bit")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def steps_per_epoch(dataset_size: float, batch_size: float) -> float:
    """N / B, fractional (see the module doc)."""
    if batch_size <= 0 or dataset_size <= 0:
        raise ValueError("dataset_size and batch_size must be positive")
    return float(dataset_size) / float(batch_size)


def epoch_seconds(step_ms: float | np.ndarray, dataset_size: float, batch_size: float) -> float | np.ndarray:
    """Seconds per epoch: N / B x step time (ms) / 1000."""
    return steps_per_epoch(dataset_size, batch_size) * np.asarray(step_ms, dtype=float) / 1000.0


def total_hours(epochs: float | np.ndarray, epoch_s: float | np.ndarray) -> float | np.ndarray:
    """Training hours: epochs x seconds per epoch / 3600."""
    return np.asarray(epochs, dtype=float) * np.asarray(epoch_s, dtype=float) / 3600.0


def cost_usd(hours: float | np.ndarray, price_per_hour_usd: float | np.ndarray) -> float | np.ndarray:
    """Cost in USD: hours x on-demand price per GPU-hour (NaN where the price is unknown)."""
    return np.asarray(hours, dtype=float) * np.asarray(price_per_hour_usd, dtype=float)


def match_rows(table: pd.DataFrame, config: RunConfig, keys: Sequence[str] = STEP_KEYS,
               learning_rate: bool = True) -> np.ndarray:
    """Boolean mask of ``table`` rows with ``config``'s values in ``keys`` (and its learning rate,
    compared with a 1e-9 relative tolerance, when ``learning_rate``)."""
    missing = [k for k in (*keys, *(["learning_rate"] if learning_rate else [])) if k not in table.columns]
    if missing:
        raise SchemaError(f"table lacks column(s) {', '.join(missing)} needed to find {config.describe()}")
    cfg = config.as_dict()
    mask = np.ones(len(table), dtype=bool)
    for k in keys:
        col = table[k]
        val = cfg[k]
        mask &= (pd.to_numeric(col, errors="coerce").to_numpy() == val) if isinstance(val, (int, float)) \
            else (col.astype(str).to_numpy() == str(val))
    if learning_rate:
        lr = pd.to_numeric(table["learning_rate"], errors="coerce").to_numpy(dtype=float)
        mask &= np.isclose(lr, config.learning_rate, rtol=1e-9, atol=0)
    return mask


def end_to_end_table(gpus: Sequence[str], dataset_size: int, batch_size: int,
                     step_ms_predicted: Mapping[str, Sequence[float]],
                     epochs_predicted: Sequence[float],
                     price_per_hour_usd: Mapping[str, float | None],
                     step_ms_measured: Mapping[str, float] | None = None,
                     epochs_measured: float | None = None,
                     step_ms_in_sample: Mapping[str, float] | None = None,
                     epochs_in_sample: float | None = None) -> pd.DataFrame:
    """One row per GPU: step time, epochs, epoch seconds, hours and cost, predicted and measured.

    ``step_ms_predicted[gpu]`` and ``epochs_predicted`` hold one value per seed (held-out refits);
    tables report their mean and, for several seeds, the sd of the derived totals. ``*_in_sample``
    are the saved models' predictions (trained on every row, this configuration included).
    APEs are |predicted - measured| / measured x 100 (totals: from the per-seed totals, averaged).
    """
    ep_pred = np.asarray(epochs_predicted, dtype=float)
    rows = []
    for gpu in gpus:
        st_pred = np.asarray(step_ms_predicted[gpu], dtype=float)
        if st_pred.shape != ep_pred.shape:
            raise ValueError(f"{gpu}: {st_pred.size} step predictions for {ep_pred.size} epoch predictions")
        price = price_per_hour_usd.get(gpu)
        price = np.nan if price is None or pd.isna(price) else float(price)
        ep_s = epoch_seconds(st_pred, dataset_size, batch_size)
        hours = total_hours(ep_pred, ep_s)
        row: dict[str, Any] = {
            "gpu": gpu, "price_per_hour_usd": price, "n_seeds": int(ep_pred.size),
            "step_ms_predicted": float(st_pred.mean()), "epochs_predicted": float(ep_pred.mean()),
            "epoch_s_predicted": float(np.mean(ep_s)), "hours_predicted": float(np.mean(hours)),
            "hours_predicted_sd": float(np.std(hours, ddof=1)) if hours.size > 1 else float("nan"),
            "cost_usd_predicted": float(np.mean(cost_usd(hours, price))),
        }
        meas_step = None if step_ms_measured is None else step_ms_measured.get(gpu)
        row["step_ms_measured"] = np.nan if meas_step is None else float(meas_step)
        row["epochs_measured"] = np.nan if epochs_measured is None else float(epochs_measured)
        have = meas_step is not None and epochs_measured is not None
        if have:
            m_ep_s = float(epoch_seconds(meas_step, dataset_size, batch_size))
            m_hours = float(total_hours(epochs_measured, m_ep_s))
            row.update(epoch_s_measured=m_ep_s, hours_measured=m_hours,
                       cost_usd_measured=float(cost_usd(m_hours, price)),
                       step_ape_pct=float(np.mean(np.abs(st_pred - meas_step) / meas_step * 100)),
                       epochs_ape_pct=float(np.mean(np.abs(ep_pred - epochs_measured) / epochs_measured * 100)),
                       hours_ape_pct=float(np.mean(np.abs(hours - m_hours) / m_hours * 100)))
        else:
            row.update(epoch_s_measured=np.nan, hours_measured=np.nan, cost_usd_measured=np.nan,
                       step_ape_pct=np.nan, epochs_ape_pct=np.nan, hours_ape_pct=np.nan)
        ins_step = None if step_ms_in_sample is None else step_ms_in_sample.get(gpu)
        row["step_ms_in_sample"] = np.nan if ins_step is None else float(ins_step)
        row["epochs_in_sample"] = np.nan if epochs_in_sample is None else float(epochs_in_sample)
        if ins_step is not None and epochs_in_sample is not None:
            ins_hours = float(total_hours(epochs_in_sample, epoch_seconds(ins_step, dataset_size, batch_size)))
            row["hours_in_sample"] = ins_hours
            row["hours_in_sample_ape_pct"] = (abs(ins_hours - row["hours_measured"]) / row["hours_measured"] * 100
                                              if have else np.nan)
        else:
            row["hours_in_sample"] = np.nan
            row["hours_in_sample_ape_pct"] = np.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    out["cost_rank_predicted"] = out["cost_usd_predicted"].rank(method="min").astype("Int64")
    out["cost_rank_measured"] = out["cost_usd_measured"].rank(method="min").astype("Int64")
    return out[END_TO_END_COLUMNS]


END_TO_END_COLUMNS: list[str] = [
    "gpu", "price_per_hour_usd", "n_seeds",
    "step_ms_predicted", "step_ms_in_sample", "step_ms_measured", "step_ape_pct",
    "epochs_predicted", "epochs_in_sample", "epochs_measured", "epochs_ape_pct",
    "epoch_s_predicted", "epoch_s_measured",
    "hours_predicted", "hours_predicted_sd", "hours_in_sample", "hours_measured", "hours_ape_pct",
    "hours_in_sample_ape_pct",
    "cost_usd_predicted", "cost_usd_measured", "cost_rank_predicted", "cost_rank_measured",
]


def _seeded(model: Any, seed: int) -> Any:
    """An unfitted copy of ``model`` whose random state (if any) is ``seed``."""
    from sklearn.base import clone

    copy = clone(model, safe=False)
    params = copy.get_params(deep=True) if hasattr(copy, "get_params") else {}
    for key in [k for k in params if k == "random_state" or k.endswith("__random_state")]:
        copy.set_params(**{key: seed})
    return copy


def end_to_end_example(config: RunConfig, iteration: pd.DataFrame, iteration_predictor: Any,
                       convergence: pd.DataFrame, convergence_predictor: Any, convergence_method: str,
                       specs: pd.DataFrame, gpus: Sequence[str] = (), seeds: Sequence[int] = (42,)
                       ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The end-to-end estimate of ``config`` on each GPU, predicted and measured.

    * step time, in-sample: ``iteration_predictor.predict`` (the saved model, trained on every row);
    * step time, held out: for each seed, the saved family model's unfitted copy refitted on the
      family's rows without this configuration (every GPU, every learning rate);
    * epochs, in-sample: ``convergence_predictor.predict``; held out: ``convergence_method``
      refitted without this run, per seed;
    * measured: the step time of the released row with this exact configuration on that GPU
      (learning rate included) and the run's measured T_conv.

    Returns the table (:data:`END_TO_END_COLUMNS`) and a dict describing the inputs.
    """
    from traintime.chronos.convergence import TARGET, make_estimator
    from traintime.core.specs import canonical_gpu

    if "status" in iteration:
        iteration = iteration[iteration["status"] == "ok"]
    exact = iteration[match_rows(iteration, config)]
    if exact.empty:
        raise SchemaError(f"the iteration data has no row of {config.describe()} (model, dataset, optimizer, "
                          f"batch_size, precision_bits and learning_rate must match a measured configuration)")
    wanted = [canonical_gpu(g, specs) for g in gpus] if gpus else sorted(set(exact["gpu"]))
    missing = [g for g in wanted if g not in set(exact["gpu"])]
    if missing:
        raise SchemaError(f"the iteration data has no row of {config.describe()} on GPU(s) {', '.join(missing)} "
                          f"(available: {', '.join(sorted(set(exact['gpu'])))})")
    per_gpu = exact[exact["gpu"].isin(wanted)].sort_values(["gpu", "raw_row"] if "raw_row" in exact else ["gpu"])
    first = per_gpu.groupby("gpu", sort=True).head(1).set_index("gpu").loc[wanted].reset_index()
    measured_step = per_gpu.groupby("gpu")["step_time_ms"].mean().to_dict()
    family = str(first["family"].iloc[0])
    in_sample_step = dict(zip(first["gpu"], np.asarray(iteration_predictor.predict(first), dtype=float)))

    fam_rows = iteration[iteration["family"] == family]
    train = fam_rows[~match_rows(fam_rows, config, learning_rate=False)]
    base_model = iteration_predictor.models[family]
    held_step: dict[str, list[float]] = {g: [] for g in wanted}
    for seed in seeds:
        m = _seeded(base_model, seed)
        m.fit(train, train["step_time_ms"].to_numpy(dtype=float))
        for g, p in zip(first["gpu"], np.asarray(m.predict(first), dtype=float)):
            held_step[g].append(float(p))

    conv_mask = match_rows(convergence, config, keys=("model", "dataset", "optimizer", "batch_size"))
    if "precision_bits" in convergence:
        prec = pd.to_numeric(convergence["precision_bits"], errors="coerce")
        conv_mask &= (prec.isna() | (prec == config.precision_bits)).to_numpy()
    run = convergence[conv_mask]
    if len(run) != 1:
        raise SchemaError(f"the convergence data has {len(run)} runs of {config.describe()}; the estimate needs "
                          f"exactly one (its probe features are the convergence model's input)")
    epochs_in_sample = float(np.asarray(convergence_predictor.predict(run), dtype=float)[0])
    conv_train = convergence[~conv_mask]
    held_epochs = []
    for seed in seeds:
        est = make_estimator(convergence_method, random_state=seed)
        est.fit(conv_train, conv_train[TARGET].to_numpy(dtype=float))
        held_epochs.append(float(est.predict(run)[0]))
    dataset_size = int(run["dataset_size"].iloc[0])
    prices = specs.set_index("gpu")["price_per_hour_usd"].to_dict()
    table = end_to_end_table(wanted, dataset_size, config.batch_size, held_step, held_epochs, prices,
                             step_ms_measured=measured_step, epochs_measured=float(run[TARGET].iloc[0]),
                             step_ms_in_sample=in_sample_step, epochs_in_sample=epochs_in_sample)
    info = {"config": config.describe(), "family": family, "dataset_size": dataset_size,
            "steps_per_epoch": steps_per_epoch(dataset_size, config.batch_size), "seeds": list(seeds),
            "iteration_training_rows_held_out": int(len(train)), "convergence_method": convergence_method,
            "convergence_training_runs_held_out": int(len(conv_train))}
    return table, info


#: (column, header) of the markdown view of the end-to-end table (the CSV keeps every column)
_MD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpu", "GPU"), ("price_per_hour_usd", "USD/h"),
    ("step_ms_predicted", "step ms pred."), ("step_ms_measured", "step ms meas."), ("step_ape_pct", "step APE %"),
    ("epochs_predicted", "epochs pred."), ("epochs_measured", "epochs meas."),
    ("hours_predicted", "hours pred."), ("hours_measured", "hours meas."), ("hours_ape_pct", "hours APE %"),
    ("hours_in_sample_ape_pct", "hours APE % (in-sample)"),
    ("cost_usd_predicted", "USD pred."), ("cost_usd_measured", "USD meas."),
    ("cost_rank_predicted", "cost rank pred."), ("cost_rank_measured", "cost rank meas."),
)


def end_to_end_markdown(table: pd.DataFrame, title: str, note: str) -> str:
    """Markdown view of :func:`end_to_end_table`: the main columns, a mean row, and ``note``."""
    from traintime.core.io import to_markdown

    view = table[[c for c, _ in _MD_COLUMNS]].copy()
    view["cost_rank_predicted"] = view["cost_rank_predicted"].astype(object)
    view["cost_rank_measured"] = view["cost_rank_measured"].astype(object)
    mean = {c: "" for c in view.columns}
    mean["gpu"] = "mean over GPUs"
    for c in ("step_ape_pct", "hours_ape_pct", "hours_in_sample_ape_pct"):
        mean[c] = float(view[c].mean())
    view = pd.concat([view, pd.DataFrame([mean])], ignore_index=True)
    view.columns = [h for _, h in _MD_COLUMNS]
    return f"# {title}\n\n" + to_markdown(view) + "\n" + note.strip() + "\n"
