"""A misspelt key in a job YAML (or a --set override) stops with the key named and the right
spelling suggested; before, it was dropped and its default trained with."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vibe_rl.config import load_config
from vibe_rl.errors import ConfigError
from vibe_rl.schema import TrainJob

BAD = """\
model:
  path: tiny
  lora:
    rnak: 8
train:
  learning_rate: 0.0001
  batch_size: 2
rollout:
  max_token: 64
trian:
  lr: 0.1
static_models:
  - name: qwen-max
    base_ulr: http://127.0.0.1:9/v1
"""


def test_every_unknown_key_is_named_with_its_likely_spelling(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(BAD)
    with pytest.raises(ConfigError) as err:
        TrainJob.from_yaml(path)
    message = str(err.value)
    assert str(path) in message
    for named in ("model.lora.rnak (did you mean model.lora.rank?)", "train.learning_rate (did you mean train.lr?)",
                  "rollout.max_token (did you mean rollout.max_tokens?)", "trian (did you mean train?)",
                  "static_models[0].base_ulr (did you mean static_models[0].base_url?)"):
        assert named in message, message
    assert "docs/client.md" in message


def test_overrides_are_checked_too_and_a_clean_file_loads():
    with pytest.raises(ConfigError, match=r"train\.grpo \(did you mean train\.grpo_n\?\)"):
        load_config(TrainJob, None, ["train.grpo=8"])
    job = load_config(TrainJob, None, ["train.grpo_n=8", "model.lora.rank=4"])
    assert job.train.grpo_n == 8 and job.model.lora.rank == 4


def test_the_server_refuses_to_start_on_a_misspelt_config(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("train:\n  batch_szie: 2\n")
    proc = subprocess.run([sys.executable, "-m", "vibe_rl", "swarm", "start", "--config", str(path), "--port", "9"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "train.batch_szie (did you mean train.batch_size?)" in proc.stderr + proc.stdout, proc.stderr
