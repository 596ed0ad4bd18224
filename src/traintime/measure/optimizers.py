"""Optimizer names of the benchmark, the convergence runs and ``traintime predict`` (no torch import, so the
``--no-probe`` path of ``predict`` can check an optimizer name without loading torch)."""

from __future__ import annotations

from traintime.core.errors import unknown_name

#: optimizers the benchmark and the convergence runs can build
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam", "adamw", "rmsprop", "adafactor")

#: Release spelling of the optimizers (the canonical tables keep the release's names).
OPTIMIZER_SPELLING = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop",
                      "adafactor": "Adafactor"}


def optimizer_label(name: str) -> str:
    """Release spelling (``SGD``, ``AdamW``...) of an optimizer name; unknown -> UnknownNameError."""
    try:
        return OPTIMIZER_SPELLING[str(name).lower()]
    except KeyError:
        raise unknown_name("optimizer", str(name), OPTIMIZERS) from None


#: optimizer state tensors per parameter beyond SGD's one momentum buffer (CHRONOS convention)
_OPT_STATES = {"adam": 2, "adamw": 2, "adafactor": 2}


def optimizer_state_multiplier(optimizer: str) -> int:
    """2 for Adam/AdamW/Adafactor (two moments), 1 otherwise (SGD momentum), as in CHRONOS."""
    return _OPT_STATES.get(str(optimizer).lower(), 1)
