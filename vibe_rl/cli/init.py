"""`vibe-rl init DIR`: a minimal, valid hand-written project around your own game (no template needed).

It writes a two-seat self-play game (race to ten) that trains on the tiny model out of the box:
`game.py` (rules), `test_game.py`, `agent_run.py` (one game, one episode per seat), `agent_roll.py`
(the loop), `config.yaml` (the server's TrainJob) and `task_spec.json` (what `vibe-rl run` reads; its
schema: `vibe-rl schema taskspec`). Replace the game and keep the contract the files state.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import typer

SKELETON = Path(__file__).resolve().parent / "init_project"
FILES = ("game.py", "test_game.py", "agent_run.py", "agent_roll.py", "ruff.toml")


def build_spec(name: str, short: str):
    from vibe_rl.schema.spec import Mode, Server, TaskSpec, Team, Training

    return TaskSpec(
        family="custom", name=name, short_name=short, title=f"{name} (hand-written)", gpus=0,
        description="Self-play: both seats of a two-player game share the trainable model server1; one episode "
                    "per seat, task ids <seed>-<seat>, reward 1 for the winner and 0 for the loser.",
        teams=[Team(name="players", roles=["seat"], model="server1")],
        servers=[Server(name="server1", port=10086, model_path="tiny", gpus=0, config="config.yaml",
                        url_env="VIBE_RL_SWARM_URL")],
        training=Training(batch_size=4, grpo_n=4, max_tokens=64),
        modes=[Mode(name="agent_roll", script="agent_roll.py", run_file="agent_run.py", servers=["server1"],
                    rewarded={"server1": "players"})],
        notes=["written by `vibe-rl init`: family 'custom' has no template, so `vibe-rl new` cannot re-render it; "
               "edit the files by hand"])


def build_config(name: str) -> str:
    import yaml

    from vibe_rl.schema import TrainJob

    job = TrainJob.model_validate({
        "model": {"path": "tiny"}, "rollout": {"max_tokens": 64},
        "train": {"batch_size": 4, "grpo_n": 4, "save_freq": 5},
        "experiment": {"name": f"{name}_server1", "dir": "experiments/server1"}})
    return ("# TrainJob of swarm server 'server1'. model.path: a Hugging Face model folder on a GPU machine\n"
            "# ('tiny' is the offline test model; `vibe-rl run` uses it on CPU whatever this says).\n"
            + yaml.safe_dump(job.model_dump(mode="json"), sort_keys=False))


def register(app: typer.Typer) -> None:
    @app.command("init")
    def init(
        project: Path = typer.Argument(..., help="Folder to create (or an empty one)."),
        name: str = typer.Option(None, "--name", help="Project slug (default: from the folder name)."),
        force: bool = typer.Option(False, "--force", help="Write into a non-empty folder (overwrites these files)."),
    ) -> None:
        """Write a minimal hand-written project (two-seat self-play game, config, task_spec.json) to edit."""
        from vibe_rl.errors import ConfigError
        from vibe_rl.scaffold.outdir import check_target, staged_folder

        if name and not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ConfigError(f"--name {name!r} is not a project slug: use lowercase letters, digits and '_', "
                              "starting with a letter, e.g. --name my_game.")
        check_target(project, "PROJECT", force)
        slug = name or re.sub(r"[^a-z0-9_]+", "_", project.resolve().name.lower()).strip("_")
        if not re.fullmatch(r"[a-z][a-z0-9_]*", slug or ""):
            slug = f"game_{slug}" if slug else "game"
        short = re.sub(r"[^a-z0-9]+", "-", slug)[:12].strip("-") or "game"
        spec, config = build_spec(slug, short), build_config(slug)  # both before a file is written
        with staged_folder(project, "PROJECT") as staged:
            for file in FILES:
                shutil.copyfile(SKELETON / file, staged / file)
            (staged / "config.yaml").write_text(config, encoding="utf-8")
            (staged / "task_spec.json").write_text(spec.model_dump_json(indent=2) + "\n", encoding="utf-8")
        typer.echo(f"[vibe-rl] wrote {project}: {', '.join(FILES)}, config.yaml, task_spec.json")
        where = shlex.quote(str(project))
        typer.echo("  next: python -m pytest -q test_game.py (in the folder), then "
                   f"`vibe-rl doctor {where}` and `vibe-rl run {where} --until first-step --stop`")
