"""MPS active-thread-percentage backend: start the daemon, run one client process per share, always quit it."""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from traintime.core.errors import ConfigError, DeviceStateError

log = logging.getLogger(__name__)
from traintime.emulation.restriction import Applied, Backend, RestoreOnSignal, Setting

# --- MPS ------------------------------------------------------------------------------------

#: runner(argv, env, stdin_text) -> None; raises subprocess.CalledProcessError / OSError on failure
CommandRunner = Callable[[Sequence[str], dict[str, str], "str | None"], None]


def run_command(argv: Sequence[str], env: dict[str, str], stdin: str | None = None) -> None:
    """Run a short control command (30 s limit); raise on a non-zero exit."""
    subprocess.run(list(argv), env=env, input=stdin, text=True, check=True, capture_output=True,
                   timeout=30)


class MPSBackend(Backend):
    """CUDA MPS thread-percentage restriction (no root needed with private pipe/log folders).

    The daemon runs for the session (``with backend:``) or, outside a session, for one
    :meth:`apply`. Measurements must run in a child process per percentage
    (``Applied.needs_subprocess``) whose environment is ``Applied.env``: the percentage only takes
    effect when set before CUDA initialises. The parent should not create a CUDA context itself.
    """

    label = "mps"
    dimension = "sm"
    CONTROL = "nvidia-cuda-mps-control"

    def __init__(self, runner: CommandRunner = run_command, control: str = CONTROL,
                 tmp_root: str | None = None, keep_logs: bool = False) -> None:
        self._runner = runner
        self._control = control
        self._tmp_root = tmp_root
        self._keep_logs = keep_logs
        self._dirs: dict[str, str] | None = None
        self._running = False
        self._session = 0
        self._guard: RestoreOnSignal | None = None

    @property
    def running(self) -> bool:
        return self._running

    def _env(self) -> dict[str, str]:
        assert self._dirs is not None
        return {"CUDA_MPS_PIPE_DIRECTORY": self._dirs["pipe"], "CUDA_MPS_LOG_DIRECTORY": self._dirs["log"]}

    def start(self) -> None:
        """Start the daemon with private, writable pipe/log folders (no-op if running)."""
        if self._running:
            return
        root = tempfile.mkdtemp(prefix="traintime-mps-", dir=self._tmp_root)
        self._dirs = {"root": root, "pipe": os.path.join(root, "pipe"), "log": os.path.join(root, "log")}
        os.makedirs(self._dirs["pipe"])
        os.makedirs(self._dirs["log"])
        env = {**os.environ, **self._env()}
        self._guard = RestoreOnSignal(self.stop)
        self._guard.__enter__()
        try:
            self._runner([self._control, "-d"], env, None)
        except FileNotFoundError:
            self._teardown()
            raise DeviceStateError(f"MPS: {self._control!r} not found (install the NVIDIA driver utilities "
                                   "or use backend green_ctx)") from None
        except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired) as exc:
            self._teardown()
            detail = getattr(exc, "stderr", None) or str(exc)
            raise DeviceStateError(f"MPS: could not start the daemon ({str(detail).strip()})") from None
        self._running = True
        log.info("MPS daemon started (pipe %s)", self._dirs["pipe"])

    def stop(self) -> None:
        """Stop the daemon (``echo quit | nvidia-cuda-mps-control``); idempotent."""
        if not self._running:
            self._teardown()
            return
        self._running = False  # first: a signal arriving during quit must not quit twice
        try:
            self._runner([self._control], {**os.environ, **self._env()}, "quit\n")
            log.info("MPS daemon stopped")
        except Exception as exc:
            log.error("MPS: 'quit' failed (%s); a daemon may be left behind in %s", exc,
                      self._dirs["pipe"] if self._dirs else "?")
        finally:
            self._teardown()

    def _teardown(self) -> None:
        if self._guard is not None:
            guard, self._guard = self._guard, None
            guard.__exit__(None, None, None)
        if self._dirs is not None and not self._keep_logs:
            shutil.rmtree(self._dirs["root"], ignore_errors=True)
            self._dirs = None

    def __enter__(self) -> MPSBackend:
        self._session += 1
        self.start()
        return self

    def close(self) -> None:
        self._session = max(0, self._session - 1)
        if self._session == 0:
            self.stop()

    @staticmethod
    def thread_percentage(sm_pct: float) -> int:
        """MPS takes an integer percentage in [1, 100]."""
        return int(min(100, max(1, math.floor(float(sm_pct) + 0.5))))

    @contextmanager
    def apply(self, setting: Setting) -> Iterator[Applied]:
        if setting.sms is not None:
            raise ConfigError("backend 'mps' takes an SM percentage, not an SM count")
        own = not self._running
        if own:
            self.start()
        try:
            pct = self.thread_percentage(setting.sm_pct)
            env = {**self._env(), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(pct)}
            yield Applied(backend="mps", requested_sm_pct=round(float(setting.sm_pct), 4), env=env,
                          needs_subprocess=True, notes=[f"mps_thread_pct={pct}"])
        finally:
            if own:
                self.stop()
