"""Bad input nobody thought of, through the real `vibe-rl` command: every refusal is one or two lines on stderr
that name what is wrong and the fix, exit 2, no traceback, no pydantic dump, nothing started or overwritten.
And `--help` of every command shows each option's default and examples."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
LLM_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "VIBE_RL_FIX_MODEL",
           "VIBE_RL_FIX_PROVIDER")


@pytest.fixture(scope="module")
def env():
    """No fix LLM, and a private tmux socket: a run that starts by mistake touches nobody's sessions."""
    socket = f"vibe-rl-bad-input-{uuid.uuid4().hex[:8]}"
    yield {**{k: v for k, v in os.environ.items() if k not in LLM_ENV}, "VIBE_RL_TMUX_SOCKET": socket,
           "COLUMNS": "120"}
    if shutil.which("tmux"):
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def cli(*args, cwd, env, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def refused(res: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, one or two lines on stderr holding `words`, no traceback and no pydantic dump."""
    err = res.stderr.strip()
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + err and "errors.pydantic.dev" not in err, err
    assert "validation error" not in err and len(err.splitlines()) <= 2, err
    for word in words:
        assert word in err, err
    return err


@pytest.fixture
def project(tmp_path, env) -> Path:
    assert cli("init", "race", cwd=tmp_path, env=env).returncode == 0
    return tmp_path / "race"


def edit_spec(project: Path, change) -> None:
    path = project / "task_spec.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_help_of_every_command_shows_defaults_and_examples(env, tmp_path):
    import typer.main

    from vibe_rl.cli import get_app
    from vibe_rl.cli.helptext import commands, options, polish

    root = polish(typer.main.get_command(get_app()))
    for path, command in commands(root):
        for opt in options(command):
            assert opt.help, f"{path} {opt.opts}: no help"
            shown = isinstance(opt.show_default, str) or (opt.default is not None and opt.show_default is not False)
            assert shown, f"`vibe-rl {path}` {opt.opts} shows no default"
        res = cli(*path.split(), "--help", cwd=tmp_path, env=env)
        assert res.returncode == 0 and "Examples:" in res.stdout and "vibe-rl" in res.stdout, (path, res.stdout)
        assert ("default:" in res.stdout) == bool(options(command)) or path == "", (path, res.stdout)


@pytest.mark.parametrize("case,words", [
    ("invalid_json", ["is not valid JSON", "vibe-rl doctor"]),
    ("wrong_types", ["training.batch_size: input should be greater than or equal to 1 (got -3)",
                     "gpus: input should be a valid integer", "vibe-rl schema taskspec"]),
    ("missing_field", ["servers: field required", "vibe-rl doctor"]),
    ("top_level_list", ["input should be a valid dictionary"]),
    ("binary", ["is not UTF-8 text"]),
])
def test_run_and_play_name_what_is_wrong_in_task_spec(project, env, case, words):
    spec = project / "task_spec.json"
    if case == "invalid_json":
        spec.write_text('{"family": "custom",')
    elif case == "wrong_types":
        edit_spec(project, lambda d: (d["training"].update(batch_size=-3), d.update(gpus="many")))
    elif case == "missing_field":
        edit_spec(project, lambda d: d.pop("servers"))
    elif case == "top_level_list":
        spec.write_text("[]")
    else:
        spec.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00")
    for command in ("run", "play"):
        refused(cli(command, project, "--fix", "off", "--timeout", 5, "--stop", cwd=project.parent, env=env)
                if command == "run" else cli(command, project, "--timeout", 5, cwd=project.parent, env=env), *words)
    assert not (project / "logs").exists() and not (project / "experiments").exists()


def test_run_refuses_a_misspelt_task_spec_key(project, env):
    """Before: `trainng` was dropped silently and the run trained with the defaults."""
    edit_spec(project, lambda d: d.update(trainng=d.pop("training")))
    refused(cli("run", project, "--fix", "off", "--until", "first-step", "--timeout", 1, "--stop",
                cwd=project.parent, env=env),
            "unknown key(s): trainng")
    assert not (project / "experiments").exists()


def test_a_config_yaml_with_bad_values_is_one_line_in_doctor_and_run(project, env):
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("  batch_size: 4", "  batch_size: -4", 1)
                      .replace("  max_tokens: 64", "  max_tokens: many", 1))
    res = cli("doctor", project, cwd=project.parent, env=env)
    assert res.returncode == 1 and "errors.pydantic.dev" not in res.stdout, res.stdout
    assert "train.batch_size: input should be greater than or equal to 1 (got -4)" in res.stdout, res.stdout
    refused(cli("run", project, "--fix", "off", cwd=project.parent, env=env), "Not starting",
            "train.batch_size: input should be greater than or equal to 1 (got -4)", "rollout.max_tokens")


def test_blank_llm_env_values_count_as_unset(project, env):
    """OPENAI_API_KEY of spaces is no fix LLM: the run stops before starting on a config its server cannot load
    (before: the blank key made an LLM 'configured' and the run started, to fail later)."""
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("  batch_size:", "  batch_szie:", 1))
    blank = {**env, "OPENAI_API_KEY": "   ", "VIBE_RL_FIX_MODEL": " ", "OPENAI_BASE_URL": ""}
    refused(cli("run", project, "--until", "first-step", "--timeout", 1, "--stop", cwd=project.parent, env=blank),
            "Not starting", "batch_szie")
    assert not (project / "experiments").exists()


def test_fix_llm_description_hides_the_credentials_of_its_url():
    from vibe_rl.autopilot.llm import llm_from_env

    llm = llm_from_env({"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "https://me:s3cret@llm.example:8443/v1"})
    assert llm.describe() == "openai:gpt-4o-mini @ llm.example:8443"


def test_status_names_a_missing_folder_and_a_file(tmp_path, env):
    (tmp_path / "a_file").write_text("x")
    refused(cli("status", "nowhere", cwd=tmp_path, env=env), "nowhere does not exist")
    refused(cli("status", "a_file", cwd=tmp_path, env=env), "a_file is a file")


def test_new_refuses_spec_files_that_are_not_text(tmp_path, env):
    binary = tmp_path / "spec.bin"
    binary.write_bytes(Path(sys.executable).resolve().read_bytes()[:4096])
    refused(cli("new", "--spec-file", binary, "--dry-run", cwd=tmp_path, env=env), "is a binary file")
    utf16 = tmp_path / "spec16.md"
    utf16.write_bytes("who is spy, 8 GPUs, batch 16".encode("utf-16-le"))  # no BOM: NULs decode as UTF-8 too
    refused(cli("new", "--spec-file", utf16, "--dry-run", "--planner", "offline", cwd=tmp_path, env=env),
            "UTF-16 without a byte-order mark")
    refused(cli("new", "--spec-file", "/dev/null", "--dry-run", cwd=tmp_path, env=env), "not a regular file")


def test_new_refuses_planning_options_with_plan(project, env, tmp_path):
    out = tmp_path / "rendered"
    for extra in (["--family", "werewolves"], ["--planner", "offline"], ["--rules-rounds", "5"]):
        refused(cli("new", "--plan", project, "--out", out, *extra, cwd=tmp_path, env=env),
                f"{extra[0]} cannot be used with --plan")
    assert not out.exists()


def test_run_stop_alone_refuses_options_it_would_drop(project, env):
    refused(cli("run", project, "--stop", "--fresh", cwd=project.parent, env=env), "--fresh with --stop alone")
    refused(cli("run", project, "--stop", "--set", "train.lr=1e-5", cwd=project.parent, env=env), "--set")
    refused(cli("run", project, "--stop", "--timeout", "600", cwd=project.parent, env=env), "--timeout with --stop alone")


def test_swarm_commands_check_set_and_url_before_anything(tmp_path, env):
    refused(cli("swarm", "start", "--port", 0, "--set", "train.lr", cwd=tmp_path, env=env, timeout=60),
            "--set 'train.lr'", "key.sub=value")
    refused(cli("swarm", "start", "--port", 0, "--set", "train.lerning_rate=1", cwd=tmp_path, env=env, timeout=60),
            "did you mean train.lr?")
    for command in ("status", "stop"):
        refused(cli("swarm", command, "--url", "127.0.0.1:10086", cwd=tmp_path, env=env),
                "is not a server URL", "http://127.0.0.1:10086")
    refused(cli("swarm", "overwatch", "--once", "--url", " ", cwd=tmp_path, env=env), "is not a server URL")
    refused(cli("swarm", "status", "--url", "http://127.0.0.1:99999", cwd=tmp_path, env=env), "invalid port")


def test_swarm_plot_refuses_an_out_that_is_a_folder_or_no_image(tmp_path, env):
    """Before: a folder wrote FOLDER.png and printed 'curves: FOLDER'; a .txt ended in matplotlib's traceback."""
    experiment = tmp_path / "experiment"
    experiment.mkdir()
    (experiment / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward_mean": 0.5, "loss": 0.1}) + "\n")
    (tmp_path / "plots").mkdir()
    refused(cli("swarm", "plot", experiment, "--out", "plots", cwd=tmp_path, env=env), "is a folder")
    refused(cli("swarm", "plot", experiment, "--out", "curves.txt", cwd=tmp_path, env=env), "not an image format")
    assert not (tmp_path / "plots.png").exists() and not (tmp_path / "curves.txt").exists()
