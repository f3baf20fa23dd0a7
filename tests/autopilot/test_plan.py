"""How `vibe-rl run` lays out sessions: names, GPU split, CPU settings (no processes started)."""

from __future__ import annotations

import pytest

from vibe_rl.autopilot import identity
from vibe_rl.autopilot.plan import RunOptions, Until, parse_until, plan_sessions
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
    key = identity.key(base_project)
    assert [s.session.name for s in servers] == [f"spy-{key}-swarm-server", f"spy-{key}-swarm-server-2"]
    assert client.name == f"spy-{key}-swarm-client" and client.command == "python agent_roll_adv.py"
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
    assert any("server1 runs the tiny offline model with train.batch_size=2 (CPU cap" in n for n in notes), notes
    assert "VIBE_RL_SET" not in client.env  # the client sizes its loop by the server's effective job
    assert any("tiny offline model" in n for n in notes)
    # the keyless static opponent is served locally by the server itself, and said so up front
    assert "static_models=" not in cmd and any("DASHSCOPE_API_KEY is not set" in n for n in notes)


def test_cpu_caps_keep_small_config_values_and_leave_set_keys_to_the_user(base_project, tmp_path, monkeypatch):
    import shutil

    proj = tmp_path / "proj"
    shutil.copytree(base_project, proj, ignore=shutil.ignore_patterns(".venv-*"))
    cfg = proj / "config.yaml"
    cfg.write_text(cfg.read_text().replace("grpo_n:", "grpo_n: 1 #", 1))  # already below the CPU cap
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    notes: list[str] = []
    opts = RunOptions(project_dir=proj, overrides=["train.batch_size=3"])
    servers, client = plan_sessions(TaskSpec.load(proj), "agent_roll", opts, proj, proj, notes)
    cmd = servers[0].session.command
    assert "train.grpo_n" not in cmd  # 1 is kept: the cap only lowers
    assert cmd.count("train.batch_size") == 1 and "--set train.batch_size=3" in cmd  # --set wins, no CPU cap
    note = next(n for n in notes if n.startswith("CPU run"))
    assert "train.grpo_n=1 (kept from config.yaml)" in note and "train.batch_size=3 (--set)" in note
    assert "rollout.max_tokens=16 (CPU cap" in note and client.env["VIBE_RL_MAX_TOKENS"] == "16"
    # a game of many seats and rounds trains at most 16 samples an update on CPU (the rest dropped and counted)
    assert "--set train.max_samples=16" in cmd and "train.max_samples=16 (CPU cap" in note


def test_two_folders_of_one_family_get_their_own_names_and_ports(base_project, tmp_path):
    spec = TaskSpec.load(base_project)
    a, b = tmp_path / "a" / "spy", tmp_path / "b" / "spy"
    assert identity.all_sessions(spec, a) != identity.all_sessions(spec, b)
    assert identity.key(a) == identity.key(a)  # stable from run to run
    port = spec.servers[0].port
    pa, pb = identity.default_port(port, a), identity.default_port(port, b)
    assert port <= pa < port + 2000 and pa % 10 == port % 10 and (pa != pb or identity.key(a) == identity.key(b))


def test_a_busy_port_moves_to_the_next_free_one():
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        moved = identity.next_free_port(busy)
        assert moved > busy and identity.port_free(moved)
        assert identity.next_free_port(busy, taken={moved}) > moved


def test_until():
    assert parse_until("first-step") == Until(updates=1) and parse_until("steps:5") == Until(updates=5)
    assert parse_until("first-signal").signal
    for bad in ("steps:0", "first", "signal"):
        with pytest.raises(ConfigError):
            parse_until(bad)


def test_static_notes_name_exactly_the_unset_env_vars(monkeypatch):
    """An opponent whose URL comes from an env var: the note names the URL's and the key's variables that are
    unset (not only the key), and a model with no endpoint at all gets no note (it is local by design)."""
    from vibe_rl.autopilot.plan import static_notes
    from vibe_rl.schema.job import StaticModel
    from vibe_rl.schema.spec import Server

    models = [StaticModel(name="qwen-plus", base_url_env="SPY_OPPONENT_BASE_URL", api_key_env="SPY_OPPONENT_API_KEY"),
              StaticModel(name="opponent")]
    spec = TaskSpec.model_construct(static_models=models)
    server = Server(name="server1", port=10086, model_path="tiny", gpus=1, config="config.yaml",
                    url_env="VIBE_RL_SWARM_URL", static_models=["qwen-plus", "opponent"])
    for env in ("SPY_OPPONENT_BASE_URL", "SPY_OPPONENT_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    notes: list[str] = []
    static_notes(spec, server, notes)
    assert notes == ["static model 'qwen-plus': SPY_OPPONENT_BASE_URL and SPY_OPPONENT_API_KEY are not set, so "
                     "server server1 serves it with a frozen local copy of its own model"]
    monkeypatch.setenv("SPY_OPPONENT_API_KEY", "k")
    notes.clear()
    static_notes(spec, server, notes)
    assert notes == ["static model 'qwen-plus': SPY_OPPONENT_BASE_URL is not set, so server server1 serves it "
                     "with a frozen local copy of its own model"]
    monkeypatch.setenv("SPY_OPPONENT_BASE_URL", "http://127.0.0.1:9/v1")
    notes.clear()
    static_notes(spec, server, notes)
    assert notes == []


def test_the_model_a_run_serves_is_the_one_its_notes_name(base_project, monkeypatch):
    """`--model smollm2` replaces the tiny model on CPU and the spec's model on GPUs; `--set model.path=` wins over
    both, and the CPU note and the GPU memory note name what really runs (they named the tiny model and the spec's
    7B while another path was served)."""
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)

    def plan(gpus: str, **opts):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
        notes: list[str] = []
        servers, _ = plan_sessions(TaskSpec.load(base_project), "agent_roll", RunOptions(project_dir=base_project, **opts),
                                   base_project / ".venv-server", base_project / ".venv-client", notes)
        return notes, servers[0].session.command

    notes, cmd = plan("", model="smollm2")
    assert "--model smollm2" in cmd and "--model tiny" not in cmd
    assert any("server1 runs SmolLM2-135M-Instruct" in n for n in notes), notes
    notes, cmd = plan("", overrides=["model.path=/models/mine"])
    assert any("server1 runs the model at /models/mine" in n for n in notes), notes
    notes, cmd = plan("0,1,2,3", model="smollm2")
    assert "--model smollm2" in cmd
    fit = [n for n in notes if "GPU" in n and "server1" in n]
    assert fit and not any("7B" in n or "7.0B" in n for n in fit), fit
