"""The progress display: a tqdm bar per epoch (loss, metrics, samples/s, ETA), or, when
tqdm is not installed, a plain line every few seconds."""
from __future__ import annotations

import sys
import time

__all__ = ["ProgressBar"]

_REFRESH_SECONDS = 0.25  # postfix updates cost more than a step of a tiny model
_PRINT_SECONDS = 5.0


def _format(values: dict[str, float]) -> str:
    return " ".join(f"{k} {v:.4g}" for k, v in values.items())


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class ProgressBar:
    """One bar per epoch; ``update`` after each optimizer step, ``close`` at the end.

    Args:
        enabled: False shows nothing.
        file: where to write (stderr by default).
    """

    def __init__(self, enabled: bool = True, file=None) -> None:
        self.enabled = enabled
        self.file = file or sys.stderr
        self._bar = None
        self._tqdm = None
        if enabled:
            try:
                from tqdm.auto import tqdm
                self._tqdm = tqdm
            except ImportError:
                self._tqdm = None

    def start_epoch(self, epoch: int, total_steps: int | None, done_steps: int = 0) -> None:
        """Begin the bar of ``epoch`` (``total_steps`` optimizer steps, if known)."""
        if not self.enabled:
            return
        self.close()
        self._epoch, self._total, self._done = epoch, total_steps, done_steps
        self._samples, self._start = 0, time.perf_counter()
        self._last_refresh = 0.0
        if self._tqdm is not None:
            self._bar = self._tqdm(total=total_steps, initial=done_steps,
                                   desc=f"epoch {epoch}", unit="step", file=self.file,
                                   dynamic_ncols=True, leave=True)

    def update(self, samples: int, values: dict[str, float]) -> None:
        """One optimizer step done, over ``samples`` samples; show ``values``."""
        if not self.enabled:
            return
        self._done += 1
        self._samples += samples
        now = time.perf_counter()
        elapsed = now - self._start
        if self._bar is not None:
            self._bar.update(1)
            if now - self._last_refresh >= _REFRESH_SECONDS:
                self._last_refresh = now
                shown = {k: f"{v:.4g}" for k, v in values.items()}
                shown["samples/s"] = f"{self._samples / max(elapsed, 1e-9):.0f}"
                self._bar.set_postfix(shown, refresh=False)
            return
        if now - self._last_refresh >= _PRINT_SECONDS:
            self._last_refresh = now
            rate = self._samples / max(elapsed, 1e-9)
            total = f"/{self._total}" if self._total else ""
            eta = ""
            if self._total:
                per_step = elapsed / max(self._done, 1)
                eta = f" ETA {_clock(per_step * (self._total - self._done))}"
            print(f"epoch {self._epoch} step {self._done}{total} {_format(values)} "
                  f"{rate:.0f} samples/s{eta}", file=self.file, flush=True)

    def summary(self, values: dict[str, float]) -> None:
        """Show end-of-epoch values (validation included)."""
        if not self.enabled:
            return
        rate = self._samples / max(time.perf_counter() - self._start, 1e-9)
        if self._bar is not None:
            shown = {k: f"{v:.4g}" for k, v in values.items()}
            shown["samples/s"] = f"{rate:.0f}"
            self._bar.set_postfix(shown)
            return
        print(f"epoch {self._epoch} done: {_format(values)} {rate:.0f} samples/s",
              file=self.file, flush=True)

    def close(self) -> None:
        """Finish the current bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
