"""Pure pydantic types shared by every layer (no heavy imports)."""

from vibe_rl.schema.job import (
    CollectionPolicy,
    EngineConfig,
    ExperimentConfig,
    LoraConfig,
    RolloutConfig,
    StaticModel,
    TrainConfig,
    TrainJob,
)
from vibe_rl.schema.spec import TaskSpec
from vibe_rl.schema.task import OpenaiBaseUrlAndApiKey, Task, WorkflowOutput

__all__ = [
    "CollectionPolicy",
    "EngineConfig",
    "ExperimentConfig",
    "LoraConfig",
    "OpenaiBaseUrlAndApiKey",
    "RolloutConfig",
    "StaticModel",
    "Task",
    "TaskSpec",
    "TrainConfig",
    "TrainJob",
    "WorkflowOutput",
]
