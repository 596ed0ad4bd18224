"""Measure on the local device: workloads by name (:mod:`.models`, :mod:`.datasets`), analytic
FLOP / byte features (:mod:`.analytic`), the CHRONOS-protocol step timer (:mod:`.timing`), the
one-batch probe (:mod:`.probe`), runs to early stopping (:mod:`.train`), device checks
(:mod:`.device`), the collection jobs (:mod:`.collect`) and the local meta-dataset with its tables
(:mod:`.local`, :mod:`.merge`).
"""
