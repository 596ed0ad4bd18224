"""traintime: predict training time and cost of deep-learning runs on any GPU.

Implements CHRONOS (iteration time x epochs to converge) and zero-shot latency prediction by
host emulation, as a library used by the Snakemake workflow of this repository.
"""

__version__ = "0.1.0"
