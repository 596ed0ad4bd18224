"""Shared foundations of every stage: configuration and its validation (:mod:`.config`), errors with
one-line messages (:mod:`.errors`), atomic file I/O (:mod:`.io`), table schemas (:mod:`.schema`), the
GPU spec table (:mod:`.specs`), metrics (:mod:`.metrics`), plotting helpers (:mod:`.plots`), the glue
that runs a workflow script inside or outside Snakemake (:mod:`.workflow`), generated documentation
(:mod:`.docs`, :mod:`.architecture`) and the report index and DAG cost (:mod:`.report`).

Nothing here imports torch or another stage.
"""
