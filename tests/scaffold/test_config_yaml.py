"""A generated config.yaml holds only what the plan decided, each line commented; the rest are the schema's
documented defaults, so the job it loads is the full job the plan builds (for the seed spec and every family's
examples), `--set` overrides still apply, and a planned value off the default is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.scaffold import list_families, load_family
from vibe_rl.scaffold.job_yaml import ALWAYS
from vibe_rl.scaffold.render import render_files
from vibe_rl.schema import TaskSpec, TrainJob
from vibe_rl.schema.job import StaticModel

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = [(m.name, ex) for m in list_families() for ex in m.examples]


def plan(family: str, example: str) -> TaskSpec:
    text = (load_family(family).path / example).read_text(encoding="utf-8")
    return OfflinePlanner().plan(text, family=family)


def configs(spec: TaskSpec, tmp_path: Path) -> dict[str, Path]:
    """Server name -> its rendered config, written to `tmp_path`."""
    files = render_files(spec, load_family(spec.family))
    out = {}
    for server in spec.servers:
        out[server.name] = tmp_path / server.config
        out[server.name].write_text(files[server.config], encoding="utf-8")
    return out


def full_dump(spec: TaskSpec, server: str, path: Path) -> Path:
    """The config as it was rendered before: every field of the job."""
    body = spec.train_job(server).model_dump(mode="json", exclude_none=True)
    path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return path


def flat(data: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out |= flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_every_family_example_is_covered():
    assert {family for family, _ in EXAMPLES} == {m.name for m in list_families()}
    assert ("who_is_spy", "examples/seed_prompt.zh.md") in EXAMPLES  # the seed spec


@pytest.mark.parametrize("family, example", EXAMPLES)
def test_the_short_config_loads_the_plans_full_job(family, example, tmp_path):
    spec = plan(family, example)
    for name, path in configs(spec, tmp_path).items():
        job = TrainJob.from_yaml(path)
        assert job == spec.train_job(name)
        assert job == TrainJob.from_yaml(full_dump(spec, name, tmp_path / f"full_{name}.yaml"))


@pytest.mark.parametrize("family, example", EXAMPLES)
def test_only_planned_keys_are_written_and_each_has_a_comment(family, example, tmp_path):
    spec = plan(family, example)
    defaults = flat(TrainJob().model_dump(mode="json"))
    static_defaults = {k: f.default for k, f in StaticModel.model_fields.items() if k != "name"}
    for name, path in configs(spec, tmp_path).items():
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        statics = data.pop("static_models")
        written = flat(data)
        assert set(ALWAYS) <= set(written), sorted(set(ALWAYS) - set(written))
        for key, value in written.items():
            assert key in ALWAYS or value != defaults[key], f"{path.name}: {key} = {value!r} is the schema default"
        for model in statics:
            assert all(v != static_defaults[k] for k, v in model.items() if k != "name"), model
        assert [m["name"] for m in statics] == spec.server(name).static_models
        for line in text.splitlines():
            if line.strip() and not line.startswith("#") and not line.endswith(":"):
                assert " # " in line, f"{path.name}: {line!r} has no comment"
        head = [line for line in text.splitlines() if line.startswith("#")]
        assert "docs/client.md" in " ".join(head) and "--set" in " ".join(head)
        assert len(text.splitlines()) < 30, text


def test_planned_values_off_the_default_are_written_and_set_still_overrides(tmp_path):
    spec = plan("who_is_spy", "examples/seed_prompt.zh.md")
    spec = spec.model_copy(update={"training": spec.training.model_copy(
        update={"temperature": 0.7, "save_freq": 10, "lr": 3e-6, "total_steps": 40})})
    path = configs(spec, tmp_path)["server1"]
    text = path.read_text(encoding="utf-8")
    for line in ("temperature: 0.7", "save_freq: 10", "lr: 3.0e-06", "total_steps: 40", "max_model_len: 8192",
                 "name: who_is_spy_server1", "api_key_env: DASHSCOPE_API_KEY"):
        assert f"  {line}" in text or f"- {line}" in text, line
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert "engine:" not in body and "lora" not in body and "micro_batch_size" not in body  # defaults
    assert TrainJob.from_yaml(path) == spec.train_job("server1")
    job = TrainJob.from_yaml(path, ["model.lora.rank=16", "train.lr=1e-5", "model.engine=auto"])
    assert (job.model.lora.rank, job.train.lr, job.model.engine) == (16, 1e-5, "auto")
    assert job.model.path == spec.servers[0].model_path and job.train.save_freq == 10


def test_the_committed_seed_project_is_short(tmp_path):
    """generated/who_is_spy/config.yaml (the seed project): the planned keys only."""
    text = (REPO / "generated" / "who_is_spy" / "config.yaml").read_text(encoding="utf-8")
    spec = TaskSpec.load(REPO / "generated" / "who_is_spy")
    assert TrainJob.from_yaml(REPO / "generated" / "who_is_spy" / "config.yaml") == spec.train_job("server1")
    assert "fused_kernels" not in text and "gpu_memory_utilization" not in text
