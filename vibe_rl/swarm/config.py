"""The swarm server's own settings (not the training job, which clients sync)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from vibe_rl.config import apply_overrides
from vibe_rl.schema import TrainJob


class ServerConfig(BaseModel):
    """How one swarm server process runs. `model`, `overrides` and `experiment_dir`
    win over whatever job a client syncs (that is how a CPU box forces the tiny model)."""

    host: str = Field(default="127.0.0.1", description="Bind address (loopback unless told otherwise)")
    port: int = Field(default=10086, ge=0, le=65535, description="TCP port")
    base_job: TrainJob | None = Field(default=None, description="Job from --config; used by an empty /control/start")
    boot_on_start: bool = Field(default=False, description="Start the engine with base_job at server start")
    model: str | None = Field(default=None, description="--model: overrides model.path of any synced job")
    overrides: list[str] = Field(default_factory=list, description="--set key.sub=value: override any synced job")
    experiment_dir: str | None = Field(default=None, description="--experiment-dir: overrides experiment.dir")
    default_discard_timeout: float = Field(default=3600.0, gt=0,
                                           description="Idle seconds before an episode without its own timeout is discarded")
    sync_wait_timeout: float = Field(default=600.0, ge=0,
                                     description="How long a chat call waits for a weight update before 429 + Retry-After")
    reaper_interval: float = Field(default=0.5, gt=0, description="Seconds between idle-episode sweeps")
    switch_interval: float = Field(default=0.001, gt=0, description=(
        "sys.setswitchinterval of the server process: how soon the event loop gets the GIL back from the "
        "engine thread (Python's 5 ms default adds milliseconds to calls while the engine is busy)"))
    trace_buffer: int = Field(default=5000, ge=1, description="Recent LLM calls kept for /control/traces")

    def effective_job(self, job: TrainJob) -> tuple[TrainJob, list[str]]:
        """The job after server-side overrides, plus one note per override that changed something."""
        data: dict[str, Any] = job.model_dump(mode="json")
        notes = []
        if self.model and data["model"]["path"] != self.model:
            notes.append(f"--model {self.model} overrides the synced model.path={data['model']['path']}")
            data["model"]["path"] = self.model
        if self.experiment_dir and data["experiment"]["dir"] != self.experiment_dir:
            notes.append(f"--experiment-dir {self.experiment_dir} overrides experiment.dir={data['experiment']['dir']}")
            data["experiment"]["dir"] = self.experiment_dir
        if self.overrides:
            before = TrainJob.model_validate(data).model_dump(mode="json")
            data = apply_overrides(data, list(self.overrides))
            after = TrainJob.model_validate(data).model_dump(mode="json")
            if after != before:
                notes.append(f"--set {' '.join(self.overrides)} overrides the synced job")
        return TrainJob.model_validate(data), notes
