"""On-disk cache of the static features of ``traintime predict`` (what needs torch / timm to compute).

Why
    The step-time model needs, per (model, input size, classes), numbers that come from the model graph
    (parameters, forward FLOPs and activation scalars per sample, layer counts) and the resolution of the
    model name (family, timm / torchvision / registry). Computing them imports torch and timm and builds
    the network on the meta device (10-20 s on a 2-core CPU); everything else of a ``--no-probe`` answer
    takes well under a second. The first call stores the numbers here; every later call reads them and
    never imports torch.

Where
    ``$TRAINTIME_CACHE`` if set, else ``$XDG_CACHE_HOME/traintime``, else ``~/.cache/traintime``; one JSON
    file per entry, ``<kind>-<sha256 of the key>.json``. ``TRAINTIME_CACHE=off`` disables the cache.

Key
    The kind of entry, its arguments (model name, input size, classes, model arguments ...), the installed
    versions of torch, torchvision and timm (read from package metadata, without importing them) and
    :data:`CACHE_FORMAT`. A library upgrade therefore misses the cache instead of reusing stale numbers.

Entries of the saved convergence model (``convergence-card``: whether it reads the probe, its per-family choice and
metadata; ``convergence-epochs``: its epochs for one convergence row) are keyed by the model file's sha256, so an
answer with epochs needs neither scikit-learn nor xgboost on a hit, and a retrained model misses
(:mod:`traintime.predict_run`).

Values are exact: they are per sample (FLOPs and activations scale linearly with the batch, applied by
:func:`traintime.predict_static.static_features`) or independent of batch and precision, so a cached answer
equals an uncached one. An entry that cannot be read, is not JSON, or whose stored key differs from the
expected one is rebuilt with a one-line warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: bump when the stored values change meaning (invalidates every entry)
CACHE_FORMAT = 1
#: packages whose versions key every entry (model definitions and FLOP counters live there)
KEY_PACKAGES: tuple[str, ...] = ("torch", "torchvision", "timm")


def cache_dir() -> Path | None:
    """The cache folder (module doc), or None when ``TRAINTIME_CACHE=off``."""
    env = os.environ.get("TRAINTIME_CACHE")
    if env is not None and env.strip().lower() in ("off", "0", "none", "false"):
        return None
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "traintime"


@lru_cache(maxsize=1)
def library_versions() -> dict[str, str]:
    """Installed versions of :data:`KEY_PACKAGES` from package metadata (no import of the packages; read once per
    process: ~4 ms a read, once per cache lookup before)."""
    from importlib import metadata

    out = {}
    for name in KEY_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def entry_key(kind: str, parts: dict[str, Any]) -> dict[str, Any]:
    """The full key stored with an entry (module doc)."""
    return {"format": CACHE_FORMAT, "kind": kind, "parts": parts, "versions": library_versions()}


def entry_path(kind: str, key: dict[str, Any], folder: Path) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return folder / f"{kind}-{digest}.json"


def _read(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The stored value, or None (missing); a corrupt or foreign entry logs one warning and gives None."""
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("key") != json.loads(json.dumps(key, default=str)) \
                or not isinstance(doc.get("value"), dict):
            raise ValueError("stored key or value does not match")
        return doc["value"]
    except (OSError, ValueError) as exc:
        log.warning("traintime cache: entry %s is stale or corrupt (%s); rebuilding it", path, exc)
        return None


def _write(path: Path, key: dict[str, Any], value: dict[str, Any]) -> None:
    """Atomic write (temporary file + rename); a read-only cache folder only logs a warning."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump({"key": key, "value": value}, fh, default=str)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("traintime cache: cannot write %s (%s); continuing without caching", path, exc)


def cached(kind: str, parts: dict[str, Any], build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``build()`` once per key; later calls (any process) read the stored JSON value (module doc).

    ``parts`` and the value must be JSON-serialisable (numbers, strings, lists, dicts, None)."""
    folder = cache_dir()
    if folder is None:
        return build()
    key = entry_key(kind, parts)
    path = entry_path(kind, key, folder)
    hit = _read(path, key)
    if hit is not None:
        return hit
    value = build()
    _write(path, key, value)
    return json.loads(json.dumps(value, default=str))  # same types as a later cache hit


def cached_frame(kind: str, parts: dict[str, Any], build: Callable[[], Any]) -> Any:
    """:func:`cached` for a ``pandas.DataFrame``: stored as CSV text with its column dtypes, read back
    with the same dtypes (floats round-trip exactly: pandas writes the shortest repr)."""
    import io

    import pandas as pd

    def as_doc() -> dict[str, Any]:
        df = build()
        return {"csv": df.to_csv(index=False), "dtypes": {c: str(t) for c, t in df.dtypes.items()}}

    doc = cached(kind, parts, as_doc)
    dtypes = doc["dtypes"]
    df = pd.read_csv(io.StringIO(doc["csv"]), dtype={c: t for c, t in dtypes.items() if t != "bool"},
                     keep_default_na=False, na_values=[""],
                     float_precision="round_trip")
    for c, t in dtypes.items():
        if t == "bool":
            df[c] = df[c].astype(bool)
    return df
