"""Zero-shot latency prediction by host emulation.

A large *host* GPU is restricted (MPS thread percentage or green-context SM count, and a locked
core clock) so that it behaves like a smaller *target* GPU; the restricted host's training-step
latency is the prediction for the target. Modules:

- :mod:`~traintime.emulation.schema`: the host-latency and target-trace table schemas.
- :mod:`~traintime.emulation.traces`: normalise the public consumer-GPU traces.
- :mod:`~traintime.emulation.mapping`: spec-based (p, f) mapping and oracle search over a sweep.
- :mod:`~traintime.emulation.baselines`: FLOPS scaling, Habitat- and NeuSight-style analytic
  models, and a learned cross-GPU baseline.
- :mod:`~traintime.emulation.analysis`: the paper's metrics and tables.

Host measurement (backends, workload, timer, sweep) lives in the modules written for the GPU side.
"""
