"""Operator graphs of the CHRONOS workloads (image models of the release, with their optimizer).

One walk per (model, input_px, num_classes, embed_dim, optimizer) of the canonical iteration table,
at batch 2 and 3 (:mod:`traintime.measure.opgraph`), extrapolated to every batch size the table has.
Models come from :func:`traintime.measure.models.create_model` (torchvision / timm / the CHRONOS MLP
builders). Optimizers: SGD (momentum 0.9), Adam, AdamW, Adafactor (torch's implementations; the
release's exact hyper-parameters do not change the operator graph). Text models (DistilBERT) need
``transformers``, which the project does not install: their rows get no op graph and are left out of
the operator-level evaluation (stated in the result tables).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from traintime.core.errors import UnknownNameError
from traintime.measure.opgraph import extrapolate, summarise, walk_step

log = logging.getLogger(__name__)

#: Columns that identify one CHRONOS walk.
CHRONOS_WALK_KEY: tuple[str, ...] = ("model", "input_px", "num_classes", "embed_dim", "optimizer")
#: Classes of the released image datasets (for rows whose ``num_classes`` is empty).
DATASET_CLASSES: dict[str, int] = {"CIFAR10": 10, "CIFAR100": 100, "STL10": 10, "TinyImageNet": 200}


def with_num_classes(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with empty ``num_classes`` filled from :data:`DATASET_CLASSES` (the head's width)."""
    nc = rows["num_classes"].astype("Float64").fillna(rows["dataset"].map(DATASET_CLASSES).astype("Float64"))
    return rows.assign(num_classes=nc)


def optimizer_factory(name: str) -> Callable[[Any], Any]:
    """A ``params -> torch optimizer`` callable for an optimizer named in the release."""
    import torch

    table = {
        "SGD": lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9),
        "Adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
        "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
        "Adafactor": lambda ps: torch.optim.Adafactor(ps, lr=1e-2),
    }
    if name not in table:
        raise UnknownNameError(f"optimizer {name!r} has no op-graph walk (known: {sorted(table)})")
    return table[name]


def chronos_step(model: str, img_px: int, batch_size: int, num_classes: int, embed_dim: int | None,
                 optimizer: str) -> pd.DataFrame:
    """:func:`traintime.measure.opgraph.summarise` of one CHRONOS training step on the meta device."""
    import torch

    from traintime.measure.models import create_model

    kw = {"embed_dim": int(embed_dim)} if embed_dim is not None and not pd.isna(embed_dim) else {}
    with torch.device("meta"):
        m = create_model(model, num_classes=int(num_classes), img_px=int(img_px), **kw)
        x = torch.randn(int(batch_size), 3, int(img_px), int(img_px))
        y = torch.randint(0, int(num_classes), (int(batch_size),))
    return summarise(walk_step(m, x, y, optimizer_factory(optimizer)))


def chronos_op_graphs(table: pd.DataFrame) -> pd.DataFrame:
    """Op-graph rows (walk key + batch_size, phase, op_class, n_ops, flops, bytes) for every image
    workload of the iteration table's ``ok`` rows; ``attrs['wall_s']`` and ``attrs['skipped']``."""
    t0 = time.perf_counter()
    ok = with_num_classes(table[(table["status"] == "ok") & table["input_px"].notna()])
    frames, skipped = [], []
    for key, g in ok.groupby(list(CHRONOS_WALK_KEY), dropna=False, sort=True):
        k = dict(zip(CHRONOS_WALK_KEY, key))
        args = (k["model"], int(k["input_px"]))
        rest = (int(k["num_classes"]), k["embed_dim"], str(k["optimizer"]))
        try:
            s = extrapolate(chronos_step(*args, 2, *rest), chronos_step(*args, 3, *rest),
                            sorted(int(b) for b in g["batch_size"].unique()))
        except Exception as exc:  # a model the registry cannot build on the meta device
            log.warning("op walk of %s failed: %s", k, exc)
            skipped.append(f"{k}: {type(exc).__name__}")
            continue
        for c in reversed(CHRONOS_WALK_KEY):
            s.insert(0, c, k[c])
        frames.append(s)
    out = pd.concat(frames, ignore_index=True)
    out.attrs["wall_s"] = time.perf_counter() - t0
    out.attrs["skipped"] = skipped
    return out
