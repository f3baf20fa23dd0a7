"""How `vibe-rl run` lays out sessions: names, GPU split, CPU settings (no processes started)."""

from __future__ import annotations

import pytest

from vibe_rl.autopilot.plan import RunOptions, parse_until, plan_sessions
from vibe_rl.errors import ConfigError
from vibe_rl.schema.spec import TaskSpec


def _plan(project, mode, monkeypatch, gpus):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    notes: list[str] = []
    servers, client = plan_sessions(TaskSpec.load(project), mode or "agent_roll", RunOptions(project_dir=project),
                                    project / ".venv-server", project / ".venv-client", notes)
    return notes, servers, client


def test_adversarial_mode_splits_eight_gpus_four_and_four(base_project, monkeypatch):
    notes, servers, client = _plan(base_project, "agent_roll_adv", monkeypatch, "0,1,2,3,4,5,6,7")
    assert [s.session.name for s in servers] == ["spy-swarm-server", "spy-swarm-server-2"]
    assert client.name == "spy-swarm-client" and client.command == "python agent_roll_adv.py"
    assert [s.session.env["CUDA_VISIBLE_DEVICES"] for s in servers] == ["0,1,2,3", "4,5,6,7"]
    assert all("--model tiny" not in s.session.command for s in servers)
    assert client.env["VIBE_RL_SWARM_URL"] == servers[0].url and client.env["VIBE_RL_SWARM_URL_2"] == servers[1].url
    assert "VIBE_RL_SET" not in client.env


def test_visible_ids_are_kept_and_a_short_machine_is_shared(base_project, monkeypatch):
    _, servers, _ = _plan(base_project, "agent_roll", monkeypatch, "4,5,6,7")
    assert servers[0].session.env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    notes, servers, _ = _plan(base_project, "agent_roll_adv", monkeypatch, "2,3")
    assert [s.session.env["CUDA_VISIBLE_DEVICES"] for s in servers] == ["2", "3"]
    assert any("8 GPUs but 2 are visible" in n for n in notes)


def test_cpu_machine_uses_the_tiny_model_with_a_note(base_project, monkeypatch):
    notes, servers, client = _plan(base_project, None, monkeypatch, "")
    cmd = servers[0].session.command
    assert "--model tiny" in cmd and "--set train.batch_size=2" in cmd and servers[0].session.env["CUDA_VISIBLE_DEVICES"] == ""
    assert "VIBE_RL_SET" not in client.env  # the client sizes its loop by the server's effective job
    assert any("tiny offline model" in n for n in notes)
    # the keyless static opponent is served locally by the server itself, and said so up front
    assert "static_models=" not in cmd and any("DASHSCOPE_API_KEY is not set" in n for n in notes)


def test_until():
    assert parse_until("first-step") == 1 and parse_until("steps:5") == 5
    with pytest.raises(ConfigError):
        parse_until("steps:0")
