# report stage: see rules/report.smk owner notes.
