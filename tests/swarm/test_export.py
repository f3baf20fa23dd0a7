"""`vibe-rl export`: train 2 steps with LoRA on a real server, export merged, load with transformers, and
get the logprobs the server served with its trained weights."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from vibe_rl.swarm import SwarmClient, Task, TrainJob  # noqa: E402

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def test_lora_checkpoint_exports_merged_with_the_servers_logits(make_server, tmp_path):
    server = make_server("lora", ["model.lora.rank=4", "train.save_freq=1", "train.total_steps=2"])
    prompt = [5, 17, 42, 99, 7, 256, 31]
    with SwarmClient(server.url) as swarm:
        swarm.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        job, i = swarm.job, 0
        while swarm.status().global_step < 2:  # rewards vary within each group, so every batch trains
            if swarm.status().pool.completed_episodes < job.train.batch_size * job.train.grpo_n:
                with swarm.episode(Task(task_id=f"t{i // job.train.grpo_n}"), timeout=120) as ep:
                    ep.openai().completions.create(model=ep.model, prompt=prompt, max_tokens=4)
                    ep.end(float(i % 2))
                i += 1
            else:
                time.sleep(0.2)
        swarm.wait_until_rolling()
        with swarm.episode(Task(task_id="probe"), timeout=120) as ep:
            served = ep.openai().completions.create(model=ep.model, prompt=prompt, max_tokens=8, seed=3,
                                                    temperature=1.0, logprobs=5)
            ep.abort()
    assert served.system_fingerprint == "v2"  # served by the weights of update 2
    checkpoint = server.exp_dir / "checkpoints" / "step_000002"
    out = tmp_path / "exported"
    refused = subprocess.run([VIBE_RL, "export", str(checkpoint), str(out)], capture_output=True, text=True)
    assert refused.returncode != 0 and "--merge-lora" in refused.stderr
    done = subprocess.run([VIBE_RL, "export", str(checkpoint), str(out), "--merge-lora"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not (out / "adapter_config.json").exists() and (out / "config.json").is_file()

    model = transformers.AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    choice = served.choices[0].logprobs
    sampled = tokenizer.convert_tokens_to_ids(choice.tokens)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + sampled])).logits[0, len(prompt) - 1:-1]  # (n, V)
    logp = logits.log_softmax(-1)
    mine = logp.gather(-1, torch.tensor(sampled)[:, None]).squeeze(-1)
    assert torch.allclose(mine, torch.tensor(choice.token_logprobs), atol=1e-4), (mine, choice.token_logprobs)
    top = logp[0].topk(5)
    assert [tokenizer.convert_ids_to_tokens(int(t)) for t in top.indices] == list(choice.top_logprobs[0])
    # the export holds the trained adapter: the untouched base model scores the same tokens differently
    from vibe_rl.engine import ensure_tiny_model

    base = transformers.AutoModelForCausalLM.from_pretrained(ensure_tiny_model(), torch_dtype=torch.float32).eval()
    with torch.no_grad():
        base_logp = base(torch.tensor([prompt + sampled])).logits[0, len(prompt) - 1:-1].log_softmax(-1)
    assert not torch.allclose(base_logp.gather(-1, torch.tensor(sampled)[:, None]).squeeze(-1), mine, atol=1e-4)


def test_full_weights_checkpoint_exports_as_is(tmp_path, tiny_model_dir):
    from vibe_rl.cli.export import export_checkpoint
    from vibe_rl.engine import load_engine
    from vibe_rl.errors import ConfigError
    from vibe_rl.schema import EngineConfig, TrainConfig

    with load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu"), TrainConfig()) as engine:
        checkpoint = engine.save(tmp_path / "ckpt")
        ids = torch.tensor([[5, 17, 42, 99]])
        with torch.no_grad():
            expected = engine.model(ids).logits
    out = export_checkpoint(checkpoint, tmp_path / "out")
    model = transformers.AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, expected, atol=1e-5)
    assert transformers.AutoTokenizer.from_pretrained(out).encode("hello")
    with pytest.raises(ConfigError, match="not empty"):
        export_checkpoint(checkpoint, out)
    export_checkpoint(checkpoint, out, force=True)  # replaced whole


def test_help_and_errors_name_the_real_checkpoint_folders(tmp_path):
    from typer.testing import CliRunner

    from vibe_rl.cli import get_app
    from vibe_rl.cli.export import export_checkpoint
    from vibe_rl.errors import ModelLoadError

    result = CliRunner().invoke(get_app(), ["export", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0 and "step_000005" in result.output and "step_5." not in result.output, result.output
    with pytest.raises(ModelLoadError, match="step_000005"):
        export_checkpoint(tmp_path / "nothing", tmp_path / "out")
