# chronos stage: see rules/chronos.smk owner notes.
