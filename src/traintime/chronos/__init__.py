"""CHRONOS: training time = epochs to converge x (N / B) x iteration time.

- Iteration (step) time: feature sets (:mod:`.features`), estimators (:mod:`.estimators`),
  protocols and out-of-fold evaluation (:mod:`.evaluation`), tables (:mod:`.iteration_tables`).
- Epochs to converge: estimators and the saved predictor (:mod:`.convergence`), protocols
  (:mod:`.convergence_protocols`), tables and figures (:mod:`.convergence_tables`).
- End to end: hours and cost (:mod:`.cost`); every published claim with a verdict (:mod:`.claims`).

Nothing here imports torch: the stage runs from the canonical tables alone.
"""
