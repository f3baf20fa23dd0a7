"""Per-update metrics to the loggers people use: jsonl (default), tensorboard, swanlab, wandb.

`experiment.loggers` in the TrainJob names them. Each backend is imported lazily, only when
named; a missing package raises `MissingExtraError` naming the extra to install. Hosted
services run in their offline/local mode when no key is set (wandb: WANDB_API_KEY,
swanlab: SWANLAB_API_KEY), so nothing is uploaded by accident.

Where they write (all under `experiment.dir`):
- jsonl: `metrics.jsonl`, one JSON object per update: {"step": int, "ts": float, ...metrics}
- tensorboard: `tensorboard/` event files, one scalar per metric under `train/<name>`
- wandb: `wandb/` (offline runs: `wandb sync` uploads them later)
- swanlab: `swanlog/` (local mode)
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Protocol

from vibe_rl.errors import ConfigError
from vibe_rl.extras import require

KNOWN = ("jsonl", "tensorboard", "swanlab", "wandb")
METRICS_FILE = "metrics.jsonl"


class MetricsLogger(Protocol):
    """One destination for per-update metrics."""

    def log(self, step: int, metrics: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """The finite numeric entries (nested dicts flattened as `outer/inner`)."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            out.update({f"{key}/{k}": v for k, v in scalars(value).items()})
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[key] = float(value)
    return out


class JsonlLogger:
    def __init__(self, exp_dir: Path):
        self.path = exp_dir / METRICS_FILE
        self._f = self.path.open("a", encoding="utf-8")

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self._f.write(json.dumps({"step": int(step), "ts": time.time(), **metrics}, default=str) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class TensorBoardLogger:
    def __init__(self, exp_dir: Path):
        require("tensorboard", "the tensorboard logger")
        writer = require("torch.utils.tensorboard", "the tensorboard logger").SummaryWriter
        self._w = writer(log_dir=str(exp_dir / "tensorboard"))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        for key, value in scalars(metrics).items():
            self._w.add_scalar(f"train/{key}", value, global_step=int(step))
        self._w.flush()

    def close(self) -> None:
        self._w.close()


class WandbLogger:
    def __init__(self, exp_dir: Path, name: str):
        wandb = require("wandb", "the wandb logger")
        mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
        self._run = wandb.init(project=os.environ.get("WANDB_PROJECT", "vibe-rl"), name=name, dir=str(exp_dir),
                               mode=mode, reinit=True)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self._run.log(scalars(metrics), step=int(step))

    def close(self) -> None:
        self._run.finish()


class SwanlabLogger:
    def __init__(self, exp_dir: Path, name: str):
        swanlab = require("swanlab", "the swanlab logger")
        mode = "cloud" if os.environ.get("SWANLAB_API_KEY") else "local"
        self._run = swanlab.init(project=os.environ.get("SWANLAB_PROJECT", "vibe-rl"), experiment_name=name,
                                 logdir=str(exp_dir / "swanlog"), mode=mode)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self._run.log(scalars(metrics), step=int(step))

    def close(self) -> None:
        self._run.finish()


def make_loggers(names: list[str], exp_dir: str | Path, run_name: str) -> list[MetricsLogger]:
    """The loggers a job names, in order. Unknown names are a ConfigError."""
    unknown = [n for n in names if n not in KNOWN]
    if unknown:
        raise ConfigError(f"experiment.loggers names unknown logger(s) {unknown}; choose from {list(KNOWN)}.")
    root = Path(exp_dir)
    root.mkdir(parents=True, exist_ok=True)
    made: list[MetricsLogger] = []
    for name in dict.fromkeys(names):
        if name == "jsonl":
            made.append(JsonlLogger(root))
        elif name == "tensorboard":
            made.append(TensorBoardLogger(root))
        elif name == "wandb":
            made.append(WandbLogger(root, run_name))
        else:
            made.append(SwanlabLogger(root, run_name))
    return made


class MetricsSink:
    """Adds throughput to each update's metrics and hands them to every logger.

    A logger that fails is reported once in `errors` and dropped; the training goes on.
    """

    def __init__(self, loggers: list[MetricsLogger]):
        self.loggers = list(loggers)
        self.errors: list[str] = []
        self._last = time.monotonic()

    def finish(self, step: int, metrics: dict[str, Any], **counts: int) -> dict[str, Any]:
        now = time.monotonic()
        seconds = max(now - self._last, 1e-9)
        self._last = now
        metrics["seconds_per_step"] = round(seconds, 3)
        metrics["episodes_per_s"] = round(metrics.get("episodes", 0) / seconds, 4)
        metrics["tokens_per_s"] = round(metrics.get("tokens", 0) / seconds, 2)
        metrics.update({k: int(v) for k, v in counts.items()})
        for logger in list(self.loggers):
            try:
                logger.log(step, metrics)
            except Exception as exc:  # a broken dashboard must not stop training; say so once
                self.loggers.remove(logger)
                self.errors.append(f"logger {type(logger).__name__} failed and was turned off: "
                                   f"{type(exc).__name__}: {exc}")
        return metrics

    def close(self) -> None:
        for logger in self.loggers:
            try:
                logger.close()
            except Exception as exc:
                self.errors.append(f"logger {type(logger).__name__} failed to close: {exc}")
        self.loggers = []


def read_jsonl(exp_dir: str | Path) -> list[dict[str, Any]]:
    """The updates a finished (or running) experiment logged to metrics.jsonl, by step (last wins)."""
    path = Path(exp_dir) / METRICS_FILE
    if not path.is_file():
        return []
    rows: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows[int(row["step"])] = row
    return [rows[s] for s in sorted(rows)]
