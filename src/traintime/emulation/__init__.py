"""Zero-shot latency prediction by host emulation.

A large *host* GPU is restricted (MPS thread percentage or green-context SM count, and a locked
core clock) so that it behaves like a smaller *target* GPU; the restricted host's training-step
latency is the prediction for the target. Modules:

- :mod:`~traintime.emulation.schema`: the host-latency and target-trace table schemas.
- :mod:`~traintime.emulation.traces`: normalise the public consumer-GPU traces.
- :mod:`~traintime.emulation.mapping`: spec-based (p, f) mapping and oracle search over a sweep.
- :mod:`~traintime.emulation.baselines`: FLOPS scaling, Habitat- and NeuSight-style analytic
  models, and a learned cross-GPU baseline.
- :mod:`~traintime.emulation.analysis`: host rows, prediction frames and the paper's metrics;
  :mod:`~traintime.emulation.tables`: Tables 1-5; :mod:`~traintime.emulation.plots`: Figures 2-7;
  :mod:`~traintime.emulation.claims`: the claims table.

Host measurement (GPU side): restriction backends (:mod:`~traintime.emulation.restriction` is the
interface; :mod:`~traintime.emulation.mps`, :mod:`~traintime.emulation.nvml_clock`,
:mod:`~traintime.emulation.green_ctx`; :mod:`~traintime.emulation.backends` combines them), the
paper's workload (:mod:`~traintime.emulation.workload`), its CUDA-graph timer
(:mod:`~traintime.emulation.timer`), sweeps (:mod:`~traintime.emulation.sweep`) and per-op profiles
(:mod:`~traintime.emulation.profile_ops`, :mod:`~traintime.emulation.op_trace`).
"""
