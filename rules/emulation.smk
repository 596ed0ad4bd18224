# emulation stage: see rules/emulation.smk owner notes.
