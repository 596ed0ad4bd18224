"""Datasets by name: sizes, classes, native input size; tensors for the offline ones (digits, synthetic) and loaders for the downloadable ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from traintime.core.errors import DataUnavailableError, unknown_name
from traintime.measure.models import _norm

# ----------------------------------------------------------------------------------------------
# Datasets
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetInfo:
    """Metadata of a dataset: ``name`` (canonical), ``chronos_name`` (released CSV spelling),
    ``num_classes``, native ``img_px``, ``train_size`` (samples in the training split the released
    code iterates over; ``digits``/``synthetic``: all samples), ``synthetic`` flag."""

    name: str
    chronos_name: str
    num_classes: int
    img_px: int
    train_size: int
    synthetic: bool = False
    offline: bool = False
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.25, 0.25, 0.25)
    aliases: tuple[str, ...] = field(default=())


DATASETS: tuple[DatasetInfo, ...] = (
    DatasetInfo("cifar10", "CIFAR10", 10, 32, 50000, mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616)),
    DatasetInfo("cifar100", "CIFAR100", 100, 32, 50000, mean=(0.5071, 0.4867, 0.4408),
                std=(0.2675, 0.2565, 0.2761)),
    DatasetInfo("stl10", "STL10", 10, 96, 5000, mean=(0.4467, 0.4398, 0.4066), std=(0.2603, 0.2566, 0.2713)),
    DatasetInfo("tinyimagenet", "TinyImageNet", 200, 64, 100000, mean=(0.4802, 0.4481, 0.3975),
                std=(0.2770, 0.2691, 0.2821), aliases=("tiny-imagenet", "tiny-imagenet-200")),
    DatasetInfo("digits", "digits", 10, 32, 1797, offline=True),
    DatasetInfo("synthetic", "synthetic", 10, 32, 512, synthetic=True, offline=True),
)


def dataset_info(name: str, img_px: int | None = None, size: int | None = None,
                 num_classes: int | None = None) -> DatasetInfo:
    """Metadata of ``name``; ``img_px`` overrides the size of ``digits``/``synthetic``, ``size`` and
    ``num_classes`` the sample and class counts of ``synthetic``. Unknown names raise
    :class:`UnknownNameError`."""
    idx = {}
    for d in DATASETS:
        for n in (d.name, d.chronos_name, *d.aliases):
            idx[_norm(n)] = d
    try:
        info = idx[_norm(name)]
    except KeyError:
        raise unknown_name("dataset", str(name), [d.name for d in DATASETS]) from None
    changes: dict[str, Any] = {}
    if img_px is not None and info.offline:
        changes["img_px"] = int(img_px)
    if size is not None and info.synthetic:
        changes["train_size"] = int(size)
    if num_classes is not None and info.synthetic:
        changes["num_classes"] = int(num_classes)
    if changes:
        from dataclasses import replace

        info = replace(info, **changes)
    return info


def _digits_tensors(img_px: int, size: int | None = None, seed: int = 0) -> tuple[Any, Any]:
    import numpy as np
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    d = load_digits()
    images, target = d.images, d.target
    if size is not None and size < len(images):  # a seeded subset (e.g. one probe batch at 224 px)
        keep = np.sort(np.random.default_rng(seed).permutation(len(images))[:size])
        images, target = images[keep], target[keep]
    x = torch.from_numpy(images.astype(np.float32) / 16.0).unsqueeze(1)  # (n, 1, 8, 8) in [0, 1]
    if img_px != 8:
        x = F.interpolate(x, size=(img_px, img_px), mode="bilinear", align_corners=False)
    x = (x - x.mean()) / x.std()
    return x.repeat(1, 3, 1, 1).contiguous(), torch.from_numpy(target.astype(np.int64))


def _synthetic_tensors(n: int, img_px: int, num_classes: int, seed: int) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    centers = torch.randn(num_classes, 3, 1, 1, generator=g)
    x = torch.randn(n, 3, img_px, img_px, generator=g) + centers[y]
    return x, y


def load_dataset(name: str, root: str | Path | None = None, img_px: int | None = None,
                 download: bool = False, size: int | None = None, seed: int = 0,
                 num_classes: int | None = None) -> Any:
    """A ``torch.utils.data.Dataset`` of (float image (3, px, px), int label) for ``name``.

    ``img_px`` resizes (``digits``/``synthetic``: generated at that size; others: ``Resize``).
    ``size``: samples of ``synthetic``, or a seeded subset of ``digits`` (default: all 1,797).
    Torchvision datasets are read from ``root`` (downloaded there only if ``download``); when
    neither works, :class:`DataUnavailableError` names the dataset and the folder.
    """
    from torch.utils.data import TensorDataset

    info = dataset_info(name, img_px=img_px, size=size, num_classes=num_classes)
    if info.name == "digits":
        return TensorDataset(*_digits_tensors(info.img_px, size, seed))
    if info.name == "synthetic":
        return TensorDataset(*_synthetic_tensors(info.train_size, info.img_px, info.num_classes, seed))
    from torchvision import datasets, transforms

    tf = [transforms.ToTensor(), transforms.Normalize(info.mean, info.std)]
    if img_px is not None and img_px != info.img_px:
        tf.insert(0, transforms.Resize((img_px, img_px)))
    tfm = transforms.Compose(tf)
    root = Path(root or "data")
    try:
        if info.name == "cifar10":
            return datasets.CIFAR10(str(root), train=True, download=download, transform=tfm)
        if info.name == "cifar100":
            return datasets.CIFAR100(str(root), train=True, download=download, transform=tfm)
        if info.name == "stl10":
            return datasets.STL10(str(root), split="train", download=download, transform=tfm)
        folder = root / "tiny-imagenet-200" / "train"
        if not folder.is_dir() and download:
            _download_tinyimagenet(root)
        if not folder.is_dir():
            raise RuntimeError(f"{folder} not found")
        return datasets.ImageFolder(str(folder), transform=tfm)
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party loader is "no data"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        how = "download failed or is disabled" if not download else "download failed"
        raise DataUnavailableError(f"dataset {info.name!r} is not available under {root} ({how}: {first}); "
                                   "use 'digits' or 'synthetic' offline") from None


#: the TinyImageNet-200 archive the released CHRONOS code downloads
TINYIMAGENET_URL = "https://cs231n.stanford.edu/tiny-imagenet-200.zip"


def _download_tinyimagenet(root: Path) -> None:
    """Download and extract ``tiny-imagenet-200.zip`` into ``root`` (kept as a cache)."""
    import urllib.request
    import zipfile

    root.mkdir(parents=True, exist_ok=True)
    archive = root / "tiny-imagenet-200.zip"
    if not archive.exists():
        tmp = archive.with_suffix(".zip.part")
        urllib.request.urlretrieve(TINYIMAGENET_URL, tmp)  # noqa: S310 - fixed https URL
        tmp.replace(archive)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(root)
