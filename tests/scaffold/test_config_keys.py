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


def test_invalid_values_are_one_line_per_key_with_the_value_given_but_never_a_secret(tmp_path):
    from pydantic import BaseModel, Field, ValidationError

    from vibe_rl.errors import field_errors

    bad = tmp_path / "job.yaml"
    bad.write_text("train:\n  batch_size: -4\n  lr: abc\n")
    with pytest.raises(ConfigError) as info:
        load_config(TrainJob, bad)
    message = str(info.value)
    assert "\n" not in message and "errors.pydantic.dev" not in message, message
    assert "train.batch_size: input should be greater than or equal to 1 (got -4)" in message, message
    assert "train.lr: input should be a valid number" in message and "(got 'abc')" in message, message

    class Creds(BaseModel):
        api_key: int
        port: int = Field(ge=1)

    with pytest.raises(ValidationError) as caught:
        Creds(api_key="sk-live-123", port=0)
    line = field_errors(caught.value)
    assert "sk-live-123" not in line and "api_key: input should be a valid integer" in line, line
    assert "port: input should be greater than or equal to 1 (got 0)" in line, line
    assert field_errors(caught.value, limit=1).endswith("; and 1 more"), field_errors(caught.value, limit=1)
