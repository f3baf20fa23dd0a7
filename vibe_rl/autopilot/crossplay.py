"""`vibe-rl eval DIR --checkpoints ...`: a cross-play table of a project's checkpoints, every model frozen.

One throwaway swarm server (a free loopback port, its own experiment folder under the work dir) serves each
picked checkpoint as a static model: `ckpt-N` with `source: checkpoint:step:N` (a LoRA checkpoint is served
merged), and `ckpt-initial`, a frozen copy of the job's model.path. The server's `checkpoints/` holds links to
the picked `step_NNNNNN` folders of the project's experiment and no `latest.json`, so it resumes nothing and,
with train.save_freq 0 and only eval episodes, never trains or writes a checkpoint.

The project's own episode code plays the games: `agent_run.play(task, endpoints, team_models, seed=...)`, given
one episode ({server: credentials}) that takes every role's calls, and `output(game, role)`, given what `play`
returned, whose metadata's bool `win` says whether `role`'s side won (a draw is nobody's). For cell (row, col) the
learner side's roles play the row's checkpoint and every other role the column's; every cell plays the same
held-out games (the last `games` tasks of the mode script's `load_tasks()`, game seeds seed, seed+1, ...).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from vibe_rl.schema import StaticModel, TrainJob
from vibe_rl.schema.spec import TaskSpec
from vibe_rl.swarm.launch import ServerNotReadyError, free_port, spawn, stop, wait_healthy
from vibe_rl.swarm.observe.crossplay import Cell, CrossPlayError, Pick, available_steps, resolve, table_json
from vibe_rl.swarm.observe.winrate import win_of

CLI = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]
SUPPORTED = ("turn_based", "werewolves", "who_is_spy")  # agent_run has play(..., team_models, seed), output(game, role)
SEED = 10_000  # the first game's seed (as the training loops' eval rounds)


@dataclass
class Project:
    """What a cross-play eval needs of a project."""

    root: Path
    family: str
    server: str  # the mode's trainable server (the endpoint name the episode code routes through)
    job: TrainJob
    checkpoints: Path
    run: ModuleType  # the mode's run_file (agent_run)
    tasks: list[Any]
    side: str  # the role whose `win` the row counts
    side_roles: list[str]  # the roles that play the row's checkpoint; the others play the column's


def _import(root: Path, name: str) -> ModuleType:
    """Import `name` from the project folder; a same-named module of another folder is dropped first."""
    for stem in {p.stem for p in root.glob("*.py")}:
        mod = sys.modules.get(stem)
        if mod is not None and Path(getattr(mod, "__file__", "") or "").resolve().parent != root:
            del sys.modules[stem]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(name)


def load_project(project: Path, mode: str | None = None, experiment_dir: Path | None = None,
                 side: str | None = None) -> Project:
    """The project's job, checkpoints, episode code and sides; CrossPlayError naming the fix when it cannot play."""
    root = Path(project).resolve()
    spec = TaskSpec.load(root)
    m = spec.mode(mode)
    server = spec.servers_for(m.name)[0]
    job = TrainJob.from_yaml(root / server.config)
    exp = Path(experiment_dir).resolve() if experiment_dir else root / job.experiment.dir
    run = _import(root, Path(m.run_file).stem)
    play, output, team = getattr(run, "play", None), getattr(run, "output", None), getattr(run, "TEAM_MODELS", None)
    if not (callable(play) and "team_models" in inspect.signature(play).parameters and callable(output)
            and isinstance(team, dict)):
        raise CrossPlayError(
            f"{root.name} (family {spec.family}): {m.run_file} needs TEAM_MODELS, play(task, endpoints, team_models, "
            "seed=...) and output(game, role) for a cross-play eval, and lacks some. The families whose episode "
            f"code has them: {', '.join(SUPPORTED)}. Add them to {m.run_file} (see templates/who_is_spy/project/"
            "agent_run.py.j2), or evaluate during training instead (eval episodes: eval/win_rate in the metrics).")
    roll = _import(root, Path(m.script).stem)
    if not callable(getattr(roll, "load_tasks", None)):
        raise CrossPlayError(f"{m.script} has no load_tasks(): the held-out games are the last tasks it returns.")
    trainable = [r for r, target in team.items() if target == server.name]
    if side is None:
        rewarded = m.rewarded.get(server.name)
        picked = [r for r in team if r in spec.roles and spec.team_of(r).name == rewarded] if rewarded else trainable
        if len(picked) != 1:
            what = f"team {rewarded!r} (rewarded on {server.name})" if rewarded else f"the trainable server {server.name!r}"
            raise CrossPlayError(f"Which side do the rows play? {m.run_file}'s TEAM_MODELS {team} has {len(picked)} "
                                 f"roles of {what}: name one with --side ROLE (one of {list(team)}).")
        side = picked[0]
    if side not in team:
        raise CrossPlayError(f"--side {side!r} is not a role of {m.run_file}'s TEAM_MODELS; roles: {list(team)}")
    mates = [r for r in team if r in spec.roles and spec.team_of(r).name == spec.team_of(side).name] \
        if side in spec.roles else [side]
    return Project(root, spec.family, server.name, job, exp / "checkpoints", run, list(roll.load_tasks()), side,
                   mates)


def held_out(tasks: list[Any], games: int) -> list[Any]:
    """The last `games` tasks (cycled when the dataset holds fewer; each game keeps its own seed)."""
    if not tasks:
        raise CrossPlayError("load_tasks() returned no task: there is nothing to play.")
    last = tasks[-games:]
    return [last[i % len(last)] for i in range(games)]


def eval_job(project: Project, picks: list[Pick], exp: Path) -> TrainJob:
    """The eval server's job: the project's, with one static model per pick and a private experiment folder."""
    statics = [StaticModel(name=p.model) if p.step == 0 else
               StaticModel(name=p.model, source=f"checkpoint:step:{p.step}", snapshot_cache=1) for p in picks]
    experiment = project.job.experiment.model_copy(update={"dir": str(exp), "loggers": ["jsonl"],
                                                           "name": f"{project.job.experiment.name}_eval"})
    return project.job.model_copy(update={"static_models": statics, "experiment": experiment})


class EvalServer:
    """A throwaway `vibe-rl swarm start` serving the picks (see the module doc); a context manager."""

    def __init__(self, project: Project, picks: list[Pick], work: Path, model: str | None = None,
                 sets: list[str] = (), max_tokens: int | None = None, timeout: float = 600.0):
        self.project, self.picks, self.work = project, picks, work
        self.model, self.sets, self.max_tokens, self.timeout = model, list(sets), max_tokens, timeout
        self.exp, self.log = work / "exp", work / "server.log"
        self.url, self.proc = "", None

    def __enter__(self) -> EvalServer:
        links = self.exp / "checkpoints"
        links.mkdir(parents=True, exist_ok=True)
        for p in self.picks:
            link = links / f"step_{p.step:06d}"
            if p.step and not link.exists():
                link.symlink_to(self.project.checkpoints / link.name, target_is_directory=True)
        config = self.work / "eval_job.yaml"
        config.write_text(yaml.safe_dump(eval_job(self.project, self.picks, self.exp).model_dump(mode="json"),
                                         sort_keys=False))
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        cmd = CLI + ["swarm", "start", "--port", str(port), "--config", str(config), "--experiment-dir",
                     str(self.exp), "--boot", "--set", "train.save_freq=0"]
        cmd += ["--model", self.model] if self.model else []
        cmd += [x for s in self.sets + ([f"rollout.max_tokens={self.max_tokens}"] if self.max_tokens else [])
                for x in ("--set", s)]
        env = {k: v for k, v in os.environ.items() if k != "VIBE_RL_SWARM_TOKEN"}
        self.proc = spawn(cmd, self.log, cwd=self.project.root, env=env, new_session=True)
        try:
            wait_healthy(self.url, self.proc, self.timeout, self.log, interval=0.5, tail_chars=2000)
        except ServerNotReadyError as e:
            self.__exit__()
            raise CrossPlayError(f"The eval server did not start: {e.log_tail}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.proc, grace=20.0, group=True, kill_wait=None)


def play_cells(project: Project, url: str, rows: list[Pick], cols: list[Pick], games: int, seed: int = SEED,
               parallel: int = 8, timeout: float = 600.0) -> dict[tuple[str, str], Cell]:
    """Every cell's games (all cells' games share one pool of `parallel` workers); (row model, col model) -> Cell."""
    from vibe_rl.swarm import SwarmClient

    tasks = held_out(project.tasks, games)
    cells = {(r.model, c.model): Cell(r.model, c.model) for r in rows for c in cols}
    team = list(project.run.TEAM_MODELS)
    with SwarmClient(url) as swarm:
        swarm.wait_until_rolling(timeout=timeout)

        def one(job: tuple[Pick, Pick, int]) -> None:
            row, col, i = job
            cell = cells[(row.model, col.model)]
            models = {role: row.model if role in project.side_roles else col.model for role in team}
            try:
                with swarm.episode(tasks[i], timeout=timeout, eval=True) as ep:
                    game = project.run.play(tasks[i], {project.server: ep.credentials}, models, seed=seed + i)
                    out = project.run.output(game, project.side)
                    ep.end(out)
                cell.add(win_of(out.metadata))
            except Exception as exc:  # counted in the cell, the first one shown
                cell.fail(exc)

        pool = ThreadPoolExecutor(max(1, parallel))
        try:
            list(pool.map(one, [(r, c, i) for r in rows for c in cols for i in range(games)]))
        finally:  # on Ctrl-C the games not started are dropped; the running ones fail once the server stops
            pool.shutdown(wait=False, cancel_futures=True)
    if all(c.errors == games for c in cells.values()):
        first = next(iter(cells.values())).error
        raise CrossPlayError(f"Every eval game failed; the first: {first}. See the server log for more.")
    return cells


def crossplay(project: Path, checkpoints: list[str], opponents: list[str] | None = None, games: int = 40,
              *, mode: str | None = None, experiment_dir: Path | None = None, side: str | None = None,
              model: str | None = None, sets: list[str] = (), max_tokens: int | None = None, seed: int = SEED,
              parallel: int = 8, work_dir: Path | None = None, timeout: float = 600.0) -> dict[str, Any]:
    """Play the table and return it as `table_json` (plus where the server's records are)."""
    if games < 1:
        raise CrossPlayError(f"--games {games}: play at least one game per cell")
    if max_tokens:  # the episode code reads it when imported
        os.environ["VIBE_RL_MAX_TOKENS"] = str(max_tokens)
    proj = load_project(project, mode, experiment_dir, side)
    steps = available_steps(proj.checkpoints)
    rows = resolve(checkpoints, steps, proj.checkpoints)
    cols = resolve(opponents, steps, proj.checkpoints) if opponents else rows
    work = Path(work_dir).resolve() if work_dir else Path(tempfile.mkdtemp(prefix="vibe-rl-eval-"))
    work.mkdir(parents=True, exist_ok=True)
    picks = rows + [c for c in cols if c.step not in {r.step for r in rows}]
    from vibe_rl.autopilot.runner import _sigterm_as_interrupt

    restore = _sigterm_as_interrupt()  # `kill`/`timeout` end the eval like Ctrl-C: the server is stopped too
    try:
        with EvalServer(proj, picks, work, model, sets, max_tokens, timeout) as server:
            cells = play_cells(proj, server.url, rows, cols, games, seed, parallel, timeout)
    finally:
        restore()
    opponents_roles = [r for r in proj.run.TEAM_MODELS if r not in proj.side_roles]
    return table_json(rows, cols, cells, project=str(proj.root), family=proj.family, side=proj.side,
                      side_roles=proj.side_roles, opponent_roles=opponents_roles, games=games, first_seed=seed,
                      checkpoints_dir=str(proj.checkpoints), work_dir=str(work),
                      server_db=str(work / "exp" / "swarm.sqlite"), server_log=str(work / "server.log"))
