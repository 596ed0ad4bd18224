"""Declarative table schemas, checked on load and documented from one place.

A :class:`TableSchema` lists :class:`Column` objects (name with its unit, dtype, whether it is
required, whether it is derived from the prediction target). :meth:`TableSchema.validate` coerces
and checks a DataFrame and raises one :class:`~traintime.core.errors.SchemaError` naming the table, the
column and the first offending row. :meth:`TableSchema.to_markdown` renders the documentation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError

_DTYPES = ("str", "int", "float", "bool")


@dataclass(frozen=True)
class Column:
    """One column: ``name`` (lower_snake_case, unit suffix such as ``_ms``), ``dtype`` in
    {str, int, float, bool}, and constraints."""

    name: str
    dtype: str
    description: str = ""
    required: bool = True
    nullable: bool = False
    min: float | None = None
    max: float | None = None
    allowed: tuple[str, ...] | None = None
    #: True when the column is computed from the prediction target (e.g. loader_ratio):
    #: no honest feature set may use it.
    target_derived: bool = False
    #: True for the prediction target itself.
    target: bool = False
    #: (column, value): the cell may be empty only where ``column`` differs from ``value``, e.g.
    #: ``("status", "ok")`` for a latency that an OOM row lacks but a completed row must have.
    required_when: tuple[str, object] | None = None

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"column {self.name}: dtype must be one of {_DTYPES}")


@dataclass(frozen=True)
class TableSchema:
    name: str
    description: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    allow_extra: bool = True
    extra_note: str = ""
    #: row-level consistency checks ``check(validated_df, where)`` run last (raise SchemaError)
    checks: tuple[Callable[[pd.DataFrame, str], None], ...] = ()
    _index: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {c.name: c for c in self.columns})

    def __getitem__(self, name: str) -> Column:
        return self._index[name]

    def __contains__(self, name: object) -> bool:
        return name in self._index

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def target_derived(self) -> list[str]:
        return [c.name for c in self.columns if c.target_derived]

    @property
    def targets(self) -> list[str]:
        return [c.name for c in self.columns if c.target]

    def validate(self, df: pd.DataFrame, source: str = "") -> pd.DataFrame:
        """Return a copy of ``df`` with columns coerced to their dtypes; raise on violations.

        ``source`` (a file name) prefixes the message so the user knows which file is wrong.
        """
        where = f"{source}: " if source else ""
        where += f"table '{self.name}'"
        if df.empty:
            raise SchemaError(f"{where}: no rows")
        missing = [c.name for c in self.columns if c.required and c.name not in df.columns]
        if missing:
            raise SchemaError(f"{where}: missing required column(s) {', '.join(missing)}")
        if not self.allow_extra:
            extra = [c for c in df.columns if c not in self._index]
            if extra:
                raise SchemaError(f"{where}: unexpected column(s) {', '.join(map(str, extra))}")
        out = df.copy()
        for col in self.columns:
            if col.name not in out.columns:
                continue
            out[col.name] = _coerce(out[col.name], col, where)
            _check(out[col.name], col, where)
        for col in self.columns:
            if col.required_when is None or col.name not in out.columns:
                continue
            other, value = col.required_when
            if other in out.columns:
                bad = out[col.name].isna() & (out[other] == value)
                if bad.any():
                    i = _first_bad(bad)
                    raise SchemaError(f"{where}: column '{col.name}' row {i + 2}: missing value "
                                      f"(required where {other} is {value!r})")
        if self.key:
            dup = out.duplicated(list(self.key), keep=False)
            if dup.any():
                row = int(np.flatnonzero(dup.to_numpy())[0])
                vals = ", ".join(f"{k}={_show(out[k].iloc[row])}" for k in self.key)
                raise SchemaError(f"{where}: duplicated key ({vals}) at row {row + 2}")
        for check in self.checks:
            check(out, where)
        return out

    def to_markdown(self) -> str:
        lines = [f"### `{self.name}`\n", self.description.strip() + "\n"]
        if self.key:
            lines.append(f"Key: {', '.join(f'`{k}`' for k in self.key)}.\n")
        lines.append("| column | type | required | meaning |")
        lines.append("|---|---|---|---|")
        for c in self.columns:
            flags = []
            if c.target:
                flags.append("**target**")
            if c.target_derived:
                flags.append("**derived from the target: never a feature**")
            if c.allowed:
                flags.append("one of " + ", ".join(f"`{a}`" for a in c.allowed))
            if c.required_when:
                flags.append(f"required where `{c.required_when[0]}` is `{c.required_when[1]}`")
            meaning = c.description + (" (" + "; ".join(flags) + ")" if flags else "")
            req = "yes" if c.required else "no"
            typ = c.dtype + (" or empty" if c.nullable else "")
            lines.append(f"| `{c.name}` | {typ} | {req} | {meaning} |")
        if self.extra_note:
            lines.append("\n" + self.extra_note.strip())
        return "\n".join(lines) + "\n"


_TRUE = {"true", "1", "yes", "t", "y"}
_FALSE = {"false", "0", "no", "f", "n"}


def _show(v: object) -> str:
    """repr of a cell value without numpy type noise (np.float64(1.5) -> 1.5)."""
    item = getattr(v, "item", None)
    return repr(item() if callable(item) else v)


def _first_bad(mask: pd.Series) -> int:
    return int(np.flatnonzero(mask.to_numpy())[0])


def _coerce(s: pd.Series, col: Column, where: str) -> pd.Series:
    if col.dtype == "str":
        return s.astype("string").astype(object).where(s.notna(), None)
    if col.dtype == "bool":
        if s.dtype == bool:
            return s
        low = s.astype("string").str.strip().str.lower()
        bad = s.notna() & ~low.isin(_TRUE | _FALSE)
        if bad.any():
            i = _first_bad(bad)
            raise SchemaError(f"{where}: column '{col.name}' row {i + 2}: {_show(s.iloc[i])} is not a boolean")
        out = low.map(lambda v: None if pd.isna(v) else v in _TRUE)
        return out if s.isna().any() else out.astype(bool)
    num = pd.to_numeric(s, errors="coerce")
    # pandas reads TRUE / False cells as booleans, which to_numeric would turn into 1 / 0; a column pandas read as
    # integers or floats holds none (no per-cell look: most columns of the large tables are numeric already)
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        is_bool = pd.Series(False, index=s.index)
    else:
        is_bool = s.map(lambda v: isinstance(v, (bool, np.bool_)))
    bad = (s.notna() & num.isna()) | is_bool
    if bad.any():
        i = _first_bad(bad)
        raise SchemaError(f"{where}: column '{col.name}' row {i + 2}: {_show(s.iloc[i])} is not a number")
    if col.dtype == "int":
        big = num.notna() & ~(num.abs() < 2.0**63)  # inf or beyond int64: not an integer we can hold
        if big.any():
            i = _first_bad(big)
            raise SchemaError(f"{where}: column '{col.name}' row {i + 2}: {_show(s.iloc[i])} is not an integer "
                              "in range")
        frac = num.notna() & (num != np.round(num))
        if frac.any():
            i = _first_bad(frac)
            raise SchemaError(f"{where}: column '{col.name}' row {i + 2}: {_show(s.iloc[i])} is not an integer")
        return num.astype("Int64") if num.isna().any() else num.astype("int64")
    return num.astype(float)


def _check(s: pd.Series, col: Column, where: str) -> None:
    if not col.nullable:
        bad = s.isna()
        if bad.any():
            i = _first_bad(bad)
            raise SchemaError(f"{where}: column '{col.name}' row {i + 2}: missing value")
    if col.dtype in ("int", "float"):
        vals = pd.to_numeric(s, errors="coerce").astype(float)
        if col.dtype == "float":
            inf = np.isinf(vals.to_numpy())
            if inf.any():
                i = int(np.flatnonzero(inf)[0])
                raise SchemaError(f"{where}: column '{col.name}' row {i + 2}: infinite value")
        if col.min is not None:
            bad = vals < col.min
            if bad.any():
                i = _first_bad(bad)
                raise SchemaError(
                    f"{where}: column '{col.name}' row {i + 2}: {_show(vals.iloc[i])} is below the minimum {col.min}")
        if col.max is not None:
            bad = vals > col.max
            if bad.any():
                i = _first_bad(bad)
                raise SchemaError(
                    f"{where}: column '{col.name}' row {i + 2}: {_show(vals.iloc[i])} is above the maximum {col.max}")
    if col.allowed is not None:
        bad = s.notna() & ~s.isin(col.allowed)
        if bad.any():
            i = _first_bad(bad)
            raise SchemaError(f"{where}: column '{col.name}' row {i + 2}: {_show(s.iloc[i])} is not one of "
                              f"{', '.join(col.allowed)}")
