# collect stage: see rules/collect.smk owner notes.
