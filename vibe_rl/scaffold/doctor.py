"""`vibe-rl doctor`: static checks of a generated (or hand-edited) project.

Each finding names the file, the line and the fix. Checks: every .py compiles; no CJK characters in code;
task ids are non-empty and unique (dataset and `Task(task_id=...)` calls); roll scripts agree with the
config on batch size and group size; the learning rate suits the model (full fine-tune or LoRA); each role is wired (TEAM_MODELS) to the model the TaskSpec intends;
every chat call is tagged with `user=`; and the plan can learn (vibe_rl.scaffold.doctor_plan).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from vibe_rl.errors import VibeRLError
from vibe_rl.scaffold.doctor_plan import check_plan
from vibe_rl.schema.job import TrainJob
from vibe_rl.schema.spec import SPEC_FILE, TaskSpec

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
CODE_SUFFIXES = (".py", ".yaml", ".yml", ".sh", ".toml")
SKIP_DIRS = {"__pycache__", "experiments", "logs", ".pytest_cache", ".ruff_cache"}
SIZE_NAMES = {"batch_size": ("BATCH_SIZE", "REMOTE_BATCH_SIZE"), "grpo_n": ("GRPO_N", "NUM_REPEAT", "N_REPEAT")}


class Finding(BaseModel):
    level: Literal["error", "warning"] = Field(description="error: must fix; warning: worth a look")
    file: str = Field(description="File, relative to the project")
    line: int = Field(default=0, description="1-based line (0: the whole file)")
    message: str = Field(description="What is wrong")
    fix: str = Field(description="How to fix it")

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{self.level}: {where}: {self.message}\n  fix: {self.fix}"


class Doctor:
    def __init__(self, project: str | Path):
        self.root = Path(project)
        self.findings: list[Finding] = []
        self.trees: dict[str, ast.Module] = {}
        self.unreadable: set[str] = set()  # files that are not UTF-8: named once, then skipped by every check

    def add(self, level: str, file: str, line: int, message: str, fix: str) -> None:
        self.findings.append(Finding(level=level, file=file, line=line, message=message, fix=fix))

    def files(self, suffixes: tuple[str, ...]) -> list[Path]:
        return [p for p in sorted(self.root.rglob("*")) if p.is_file() and p.suffix in suffixes
                and not (SKIP_DIRS & set(p.relative_to(self.root).parts))
                and not any(part.startswith(".venv") for part in p.parts) and self.rel(p) not in self.unreadable]

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # ---- checks ------------------------------------------------------------------------------
    def check_compile(self) -> None:
        for path in self.files((".py",)):
            try:
                self.trees[self.rel(path)] = ast.parse(path.read_text(encoding="utf-8"), str(path))
            except SyntaxError as exc:
                self.add("error", self.rel(path), exc.lineno or 0, f"does not compile: {exc.msg}",
                         "fix the syntax error (python -m py_compile FILE shows it)")

    def check_cjk(self) -> None:
        for path in self.files(CODE_SUFFIXES):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if CJK.search(line):
                    self.add("error", self.rel(path), number, f"Chinese/CJK text in code: {line.strip()[:60]!r}",
                             "write it in English (the spec says: no Chinese in code); data files may keep it")
                    break

    def check_dataset(self, file: str, key: str) -> None:
        path = self.root / file
        if file in self.unreadable:
            return
        if not path.is_file():
            self.add("error", file, 0, "dataset file is missing",
                     "run `python mock_dataset.py` in the project to write it")
            return
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            self.add("error", file, exc.lineno, f"not valid JSON: {exc.msg}", "regenerate it: python mock_dataset.py")
            return
        lines = [n for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if f'"{key}"' in text]
        seen: dict[str, int] = {}
        for i, record in enumerate(records if isinstance(records, list) else []):
            line = lines[i] if i < len(lines) else 0
            value = record.get(key) if isinstance(record, dict) else None
            task_id = "" if value is None else str(value).strip()
            if not task_id:
                self.add("error", file, line, f"record {i} has an empty '{key}' (its task_id)",
                         f"give every record a unique non-empty '{key}' (the episode seed); all empty ids "
                         "collapse into one GRPO group and training never starts")
            elif task_id in seen:
                self.add("error", file, line, f"record {i} repeats task_id {task_id!r} of record {seen[task_id]}",
                         f"make every '{key}' unique, e.g. draw seeds with random.sample (no repeats)")
            else:
                seen[task_id] = i

    def check_task_calls(self) -> None:
        for rel, tree in self.trees.items():
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Task"):
                    continue
                kw = next((k for k in node.keywords if k.arg == "task_id"), None)
                fix = "pass a unique, non-empty id per task, e.g. Task(task_id=str(game['seed']), ...)"
                if kw is None:
                    if not node.args and not any(k.arg is None for k in node.keywords):
                        self.add("error", rel, node.lineno, "Task(...) without task_id", fix)
                elif _constant_text(kw.value) is not None:
                    text = _constant_text(kw.value)
                    what = "an empty task_id" if not text.strip() else f"the same task_id {text!r} for every task"
                    self.add("error", rel, node.lineno, f"Task(...) gets {what}", fix)

    def check_sizes(self, spec: TaskSpec | None) -> None:
        if spec is None:
            return
        jobs: dict[str, TrainJob] = {}
        for server in spec.servers:
            path = self.root / server.config
            if server.config in self.unreadable:
                continue
            if not path.is_file():
                self.add("error", server.config, 0, f"config of server {server.name} is missing",
                         f"re-render the project or write a TrainJob YAML at {server.config}")
                continue
            try:
                job = TrainJob.from_yaml(path)
            except VibeRLError as exc:
                self.add("error", server.config, 0, str(exc), "set a valid value for each key named (docs/client.md, 'The job', describes every key)")
                continue
            jobs[server.name] = job
            self.check_lr(server.config, path, job)
            for field in SIZE_NAMES:
                if getattr(job.train, field) != getattr(spec.training, field):
                    self.add("warning", server.config, _line_of(path, field),
                             f"train.{field} is {getattr(job.train, field)} but {SPEC_FILE} says "
                             f"{getattr(spec.training, field)}", "set the same value in both (the config wins at run time)")
            for mode in spec.modes:
                if server.name in mode.servers:
                    self.check_script_sizes(mode.script, server.config, job)
        for mode in spec.modes:  # one game feeds every server of a mode, so their groups must match
            sizes = {jobs[s].train.grpo_n: s for s in mode.servers if s in jobs}
            if len(sizes) > 1:
                names = ", ".join(f"{spec.server(s).config}: {n}" for n, s in sorted(sizes.items()))
                self.add("error", spec.server(mode.servers[-1]).config, _line_of(self.root / spec.server(
                    mode.servers[-1]).config, "grpo_n"), f"mode {mode.name}: servers disagree on train.grpo_n "
                    f"({names}); {mode.script} plays each task grpo_n times for all of them",
                    "set the same train.grpo_n in every config of the mode")

    def check_lr(self, config: str, path: Path, job: TrainJob) -> None:
        """A learning rate far above what its model and method take: the first updates wreck the model."""
        lr, lora = job.train.lr, job.model.lora.rank > 0
        if lr >= 0.1:
            self.add("error", config, _line_of(path, "lr"), f"train.lr = {lr:g}: the first update will wreck "
                     "any model", "use 1e-6 to 1e-5 for a full fine-tune, 1e-5 to 2e-4 with LoRA")
            return
        if job.model.path.strip().lower() == "tiny":
            return  # the tiny CPU model takes ~1e-3 (the demo's rate)
        ceiling, typical = (1e-3, "1e-5 to 2e-4 with LoRA") if lora else (1e-4, "1e-6 to 1e-5 for a full fine-tune")
        if lr > ceiling:
            self.add("warning", config, _line_of(path, "lr"), f"train.lr = {lr:g} is large for "
                     f"{job.model.path} ({'LoRA' if lora else 'full fine-tune'}): the policy may collapse in a "
                     "few updates", f"start from {typical}")

    def check_script_sizes(self, script: str, config: str, job: TrainJob) -> None:
        tree = self.trees.get(script)
        if tree is None:
            return  # a missing script is reported by doctor_plan.check_mode_files
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                for field, names in SIZE_NAMES.items():
                    value = getattr(node.value, "value", None)
                    if getattr(target, "id", None) in names and isinstance(value, int):
                        want = getattr(job.train, field)
                        if value != want:
                            self.add("error", script, node.lineno,
                                     f"{target.id} = {value} but {config} has train.{field} = {want}",
                                     f"read it from the config (job.{field}) instead of hard-coding it")
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        if not any(s.endswith((".yaml", ".yml")) for s in strings):
            return
        if config not in strings:
            self.add("warning", script, 0, f"does not mention its server config {config}",
                     f"load TrainJob.from_yaml(HERE / '{config}') so sizes come from the config")

    def check_wiring(self, spec: TaskSpec | None) -> None:
        if spec is None:
            return
        for mode in spec.modes:
            tree = self.trees.get(mode.run_file)
            if tree is None:
                continue
            wiring, line = _team_models(tree)
            if wiring is None:
                self.add("warning", mode.run_file, 0, "no TEAM_MODELS dict: cannot check which model each role uses",
                         'declare TEAM_MODELS = {"<role>": "<server or static model>"} and route calls by it')
                continue
            for role in spec.roles:
                want = spec.model_for_role(role, mode.name)
                got = wiring.get(role)
                if got != want.name:
                    kind = "trainable server" if want.kind == "server" else "static model"
                    self.add("error", mode.run_file, line,
                             f"mode {mode.name}: {role} players are wired to {got!r}, but the spec wants the "
                             f"{kind} {want.name!r} (team {want.team})",
                             f'set TEAM_MODELS["{role}"] = "{want.name}"')

    def check_user_tags(self) -> None:
        for rel, tree in self.trees.items():
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "create"
                        and "completions" in ast.unparse(node.func.value)
                        and not any(k.arg == "user" for k in node.keywords)):
                    self.add("error", rel, node.lineno, "chat call without user= tag",
                             'pass user=f"{role}:{player_id}" so traces show which player spoke to which model')

    def run(self) -> list[Finding]:
        if not self.root.is_dir():
            self.add("error", str(self.root), 0, "not a folder", "pass the project folder: vibe-rl doctor generated/<name>")
            return self.findings
        from vibe_rl.scaffold import handwritten

        spec = None
        if handwritten.check_files(self, CODE_SUFFIXES + (".json",)):  # UTF-8 files, a task_spec.json to load
            try:
                spec = TaskSpec.load(self.root)
            except VibeRLError as exc:
                self.add("warning", SPEC_FILE, 0, f"no usable TaskSpec: {exc}".splitlines()[0],
                         "re-render with vibe-rl new, or write task_spec.json; wiring and size checks are skipped")
        self.check_compile()
        if spec is None or spec.constraints.no_chinese_in_code:
            self.check_cjk()
        dataset = _dataset_of(spec, self.root)
        if dataset:
            self.check_dataset(*dataset)
        self.check_task_calls()
        self.check_sizes(spec)
        if spec is not None:
            check_plan(self, spec)
            from vibe_rl.engine.memory import spec_fit_notes

            fits = [] if any(s.config in self.unreadable for s in spec.servers) else spec_fit_notes(spec, self.root)
            for fit in fits:  # will each server's model fit the GPUs it gets?
                if not fit.fits:
                    self.add("warning", fit.config, 0, fit.message.split(": WILL NOT FIT")[0] + ": will not fit",
                             "use " + fit.fix)
        # hand-written projects: schema errors, a family with no template
        if SPEC_FILE not in self.unreadable:
            handwritten.check_spec_file(self, self.root)
        handwritten.check_family(self, spec)
        self.check_wiring(spec)
        self.check_user_tags()
        return self.findings


def _constant_text(node: ast.AST) -> str | None:
    """The text of a constant expression ('' , 'x', str(''), f'...' without fields), else None."""
    if isinstance(node, ast.Constant):
        return str(node.value) if node.value is not None else ""
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "str":
        return _constant_text(node.args[0]) if node.args else ""
    return None


def _team_models(tree: ast.Module) -> tuple[dict[str, str] | None, int]:
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "TEAM_MODELS" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            pairs = zip(node.value.keys, node.value.values, strict=True)
            return {_constant_text(k) or "": _constant_text(v) or ast.unparse(v) for k, v in pairs}, node.lineno
    return None, 0


def _line_of(path: Path, key: str) -> int:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith(f"{key}:"):
            return number
    return 0


def _dataset_of(spec: TaskSpec | None, root: Path) -> tuple[str, str] | None:
    """(file, task_id key) from the family manifest; else the Who-is-Spy default when that file exists."""
    if spec is not None:
        try:
            from vibe_rl.scaffold.families import load_family

            dataset = load_family(spec.family).dataset
            if dataset:
                return dataset.file, dataset.task_id_key
        except VibeRLError:
            pass
    return ("mock_game_dataset.json", "seed") if (root / "mock_game_dataset.json").is_file() else None


def diagnose(project: str | Path) -> list[Finding]:
    return Doctor(project).run()
