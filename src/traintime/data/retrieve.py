"""Fetch third-party files from pinned public URLs or an offline mirror, verified by sha256.

A *source* (see ``config.yaml: data.sources``) is a pinned public location::

    chronos:
      url: https://raw.githubusercontent.com/<owner>/<repo>/<commit>/{path}
      files: {epoch_time_prediction/data/CNN.csv: <sha256>, ...}

The mirror is a folder holding ``<source>/<path>`` (the layout of ``../shared/data``). It is taken
from ``TRAINTIME_DATA_MIRROR`` if set, else from ``data.mirror`` in the config. The mirror is tried
first, then the URL; every file is checked against its pinned sha256 before it is used.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from traintime.core.errors import ChecksumError, ConfigError, DataUnavailableError
from traintime.core.io import atomic_path

log = logging.getLogger(__name__)

MIRROR_ENV = "TRAINTIME_DATA_MIRROR"


@dataclass(frozen=True)
class Source:
    name: str
    url: str
    files: dict[str, str]

    @classmethod
    def from_config(cls, name: str, cfg: dict) -> "Source":
        if "{path}" not in cfg.get("url", ""):
            raise ConfigError(f"data.sources.{name}.url must contain '{{path}}'")
        return cls(name=name, url=cfg["url"], files=dict(cfg.get("files", {})))

    def sha256(self, path: str) -> str:
        try:
            return self.files[path]
        except KeyError:
            raise ConfigError(f"data.sources.{self.name}: no sha256 pinned for '{path}'") from None


def sha256_of(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def resolve_mirror(config_mirror: str | None) -> Path | None:
    """The mirror folder: ``$TRAINTIME_DATA_MIRROR`` wins over the config key; None if unset."""
    value = os.environ.get(MIRROR_ENV) or config_mirror
    return Path(value).expanduser() if value else None


def verify(path: Path, expected: str, origin: str) -> None:
    got = sha256_of(path)
    if got != expected:
        raise ChecksumError(f"checksum mismatch for {origin}: sha256 {got}, expected {expected} "
                            "(the file changed or is corrupt; nothing was written)")


def retrieve(source: Source, path: str, dest: str | os.PathLike[str], mirror: Path | None,
             timeout_s: float = 60.0, allow_download: bool = True) -> str:
    """Copy ``source/path`` to ``dest`` from the mirror or the pinned URL; return the origin used.

    Raises :class:`ChecksumError` when a copy exists but has the wrong sha256 (a corrupt mirror is
    never silently bypassed) and :class:`DataUnavailableError` when neither place has the file.
    """
    expected = source.sha256(path)
    dest = Path(dest)
    tried: list[str] = []
    if mirror is not None:
        candidate = mirror / source.name / path
        if candidate.is_file():
            verify(candidate, expected, str(candidate))
            with atomic_path(dest) as tmp:
                shutil.copyfile(candidate, tmp)
            log.info("copied %s from mirror %s", path, candidate)
            return str(candidate)
        tried.append(f"mirror {candidate} (absent)")
    else:
        tried.append(f"no mirror (set {MIRROR_ENV} or data.mirror)")
    if allow_download:
        url = source.url.format(path=path)
        try:
            with atomic_path(dest) as tmp:
                with urllib.request.urlopen(url, timeout=timeout_s) as resp, open(tmp, "wb") as out:
                    shutil.copyfileobj(resp, out)
                verify(tmp, expected, url)
            log.info("downloaded %s", url)
            return url
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            tried.append(f"download {url} ({reason})")
    raise DataUnavailableError(f"cannot get {source.name}/{path}: " + "; ".join(tried))


def retrieve_optional(source: Source, dest_root: str | os.PathLike[str], mirror: Path | None,
                      allow_download: bool = True, timeout_s: float = 60.0,
                      flatten: bool = False) -> list[dict[str, object]]:
    """Retrieve every pinned file of an optional ``source`` to ``dest_root/<path>`` (``dest_root/<file name>``
    with ``flatten``); one record per file (path, present, origin, reason). A file neither place has is
    recorded as absent (logged); a :class:`ChecksumError` propagates (a corrupt copy is never skipped)."""
    records: list[dict[str, object]] = []
    for path in sorted(source.files):
        rec: dict[str, object] = {"path": path, "present": False, "origin": None, "reason": None}
        dest = Path(dest_root) / (Path(path).name if flatten else path)
        try:
            rec["origin"] = retrieve(source, path, dest, mirror, timeout_s=timeout_s, allow_download=allow_download)
            rec["present"] = True
        except DataUnavailableError as exc:
            log.warning("skipping %s: %s", Path(path).stem, exc)
            rec["reason"] = str(exc)
        records.append(rec)
    return records


def available_in_mirror(source: Source, mirror: Path | None) -> list[str]:
    """Paths of ``source`` present in the mirror (for sources where any subset is usable)."""
    if mirror is None:
        return []
    return [p for p in source.files if (mirror / source.name / p).is_file()]


def verify_retrieved(paths: list[str | os.PathLike[str]], sources: dict, raw_root: str = "results/raw") -> None:
    """Check retrieved files (``<raw_root>/<source>/<path>``) against their pinned sha256 again,
    before a normaliser reads them: a file truncated, edited or doubled after retrieval raises
    :class:`ChecksumError` naming it (delete it and rerun to retrieve it again)."""
    root = Path(raw_root)
    for p in map(Path, paths):
        try:
            rel = p.relative_to(root)
        except ValueError:
            continue  # not a retrieved file (e.g. a user-supplied table)
        source, path = rel.parts[0], "/".join(rel.parts[1:])
        expected = (sources.get(source) or {}).get("files", {}).get(path)
        if expected is None:
            raise ConfigError(f"data.sources.{source}: no sha256 pinned for '{path}' (needed by {p})")
        got = sha256_of(p)
        if got != expected:
            raise ChecksumError(f"{p}: changed after it was retrieved and verified (sha256 {got}, pinned "
                                f"{expected}); delete it and rerun to retrieve it again")


def verify_raw_folder(sources: dict, raw_root: str | os.PathLike[str] = "results/raw") -> int:
    """Check every retrieved file present under ``raw_root`` against its pinned sha256 (run when the
    Snakefile is parsed, before any job: a job reading a changed file would fail only after
    Snakemake had removed its previous outputs). Returns the number of files checked."""
    root = Path(raw_root)
    n = 0
    for name, cfg in sources.items():
        for path, expected in (cfg.get("files") or {}).items():
            p = root / name / path
            if not p.is_file():
                continue
            n += 1
            got = sha256_of(p)
            if got != expected:
                raise ChecksumError(f"{p}: sha256 {got} is not the pinned {expected}: the file changed after "
                                    "it was retrieved (or data.sources pins a new version); delete it to "
                                    "retrieve it again")
    return n
