"""Template families: folders under templates/<family>/ with a manifest.yaml and a project/ folder (and, for
the offline planner, rules.py and its vocabulary words.yaml).

Library code reads templates as files and never imports them. The folder is found through
$VIBE_RL_TEMPLATES, else next to the package (an editable install or a source checkout).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from vibe_rl.errors import TemplateError, field_errors

MANIFEST = "manifest.yaml"


class FamilyNameError(TemplateError):
    """A plan names a template family that is not in the registry (e.g. a path)."""

PROJECT_DIR = "project"


class Words(BaseModel):
    """How a spec names a parameter (vibe_rl.planner.table): a number next to one of these words sets it."""

    en: list[str] = Field(default_factory=list, description="English words (regex fragments, matched whole)")
    zh: list[str] = Field(default_factory=list, description="Chinese words (regex fragments, matched anywhere)")
    unit: list[str] = Field(default_factory=list, description="Units that may follow the number")
    after: list[str] = Field(default_factory=list, description="Words that name it when they follow the number")


class Parameter(BaseModel):
    default: Any = Field(description="Value used when the spec does not set it")
    words: Words | None = Field(default=None, description="The parameter's row of the family's field table: the "
                                "offline planner reads it where a number stands next to one of these words")
    description: str = Field(default="", description="What the parameter means")
    min: float | None = Field(default=None, description="Smallest value the family's game accepts (numbers only)")
    max: float | None = Field(default=None, description="Largest value the family's game accepts (numbers only)")

    def problem(self, name: str, value: Any) -> str | None:
        """Why `value` does not fit this parameter, or None."""
        if self.min is None and self.max is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{name} = {value!r} is not a number"
        if self.min is not None and value < self.min:
            return f"{name} = {value:g} is below its minimum {self.min:g}"
        if self.max is not None and value > self.max:
            return f"{name} = {value:g} is above its maximum {self.max:g}"
        return None


class DatasetInfo(BaseModel):
    file: str = Field(description="Dataset file in the rendered project")
    task_id_key: str = Field(description="Key of each record that becomes Task.task_id")
    generate: list[str] = Field(default_factory=list, description="Scripts run after rendering to write data files")


class ModeInfo(BaseModel):
    """A run mode the family's templates implement; its script is rendered only when the plan has the mode."""

    name: str = Field(description="Mode name, e.g. 'agent_roll_adv'")
    script: str = Field(description="Training loop script the mode runs, e.g. 'agent_roll_adv.py'")
    run_file: str = Field(description="Episode file holding the mode's TEAM_MODELS, e.g. 'agent_run_adv.py'")
    servers: int = Field(default=1, ge=1, description="Trainable swarm servers the mode starts")
    description: str = Field(default="", description="What the mode trains")


class Manifest(BaseModel):
    """The contract of a template family (templates/<family>/manifest.yaml)."""

    name: str = Field(description="Family name; equals the folder name")
    description: str = Field(description="What the family trains, for users and LLM planners")
    short_name: str = Field(description="Default TaskSpec.short_name (tmux session prefix)")
    keywords: dict[str, list[str]] = Field(
        description="Language -> phrases that select this family (empty: chosen only with --family)")
    parameters: dict[str, Parameter] = Field(default_factory=dict, description="Game parameters and defaults")
    roles: list[str] = Field(default_factory=list, description="Roles the family's code knows")
    role_words: dict[str, str] = Field(default_factory=dict, description="Role -> the words a spec names it by (a "
                                       "regex; the plan review finds a role's source by them; default: its name)")
    dataset: DatasetInfo | None = Field(default=None, description="Where task ids come from")
    modes: list[ModeInfo] = Field(default_factory=list, description="Run modes the templates implement, default first")
    examples: list[str] = Field(default_factory=list, description="Example spec prompts, relative to the family")
    path: Path = Field(default=Path("."), exclude=True, description="The family folder")

    @property
    def project_dir(self) -> Path:
        return self.path / PROJECT_DIR

    def all_keywords(self) -> list[str]:
        return [word for words in self.keywords.values() for word in words]

    def resolve_parameters(self, game: dict[str, Any]) -> dict[str, Any]:
        """Manifest defaults overlaid by the spec's values; unknown names are an error."""
        unknown = sorted(set(game) - set(self.parameters))
        if unknown:
            raise TemplateError(f"Family {self.name} has no parameters {unknown}; "
                                f"it knows {sorted(self.parameters)} (see {self.path / MANIFEST}).")
        resolved = {name: game.get(name, p.default) for name, p in self.parameters.items()}
        problems = {name: why for name, p in self.parameters.items() if (why := p.problem(name, resolved[name]))}
        if problems:
            raise TemplateError(f"Family {self.name}: {'; '.join(problems.values())} ({self.path / MANIFEST}). "
                                f"Change the number in the spec, or {', '.join('game.' + n for n in problems)} in "
                                "task_spec.json and render it with `vibe-rl new --plan task_spec.json`.")
        return resolved


def templates_root() -> Path:
    env = os.environ.get("VIBE_RL_TEMPLATES")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / "templates"
    if not root.is_dir():
        raise TemplateError(f"Template folder {root} not found. Set VIBE_RL_TEMPLATES to the templates/ folder of "
                            "a vibe-rl checkout, or install vibe-rl editable (pip install -e .).")
    return root


FAMILY_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


def check_family_name(name: object, root: Path | None = None) -> None:
    """A family is a name from the registry (a folder of templates/ with a manifest), never a path: `../x` or
    `/tmp/x` would render (and run the data scripts of) a folder outside the templates."""
    base = root or templates_root()
    if not isinstance(name, str) or not FAMILY_NAME.fullmatch(name) or (base / name).is_symlink():
        shown = repr(name)[:80]
        raise FamilyNameError(f"plan field family = {shown} is refused: a family is one of the registry's names, "
                              f"not a path. {supported_text(root)} Set family to one of them.")


def load_family(name: str, root: Path | None = None) -> Manifest:
    check_family_name(name, root)
    folder = (root or templates_root()) / name
    path = folder / MANIFEST
    if not path.is_file():
        raise TemplateError(f"No template family {name!r} (no {path}). {supported_text(root)}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        manifest = Manifest.model_validate({**data, "path": folder})
    except yaml.YAMLError as exc:
        raise TemplateError(f"{path} is not valid YAML: {exc}") from exc
    except ValidationError as exc:
        raise TemplateError(f"{path} is not a valid manifest: {field_errors(exc)}") from None
    if manifest.name != name:
        raise TemplateError(f"{path} says name {manifest.name!r}; it must equal its folder name {name!r}")
    if not manifest.project_dir.is_dir():
        raise TemplateError(f"Family {name} has no {PROJECT_DIR}/ folder with files to render ({manifest.project_dir})")
    return manifest


@functools.cache
def family_words(folder: str | Path, file: str = "words.yaml") -> dict[str, Any]:
    """A word table (the offline planner's vocabulary of a family: `words.yaml` in its folder): name -> regex.

    A value that is a list is alternatives (joined with "|", one per line so that each reads alone); a mapping
    is a table of such values (e.g. role -> its words). `folder` may be a file in the folder (a rules.py's
    `__file__`)."""
    folder = Path(folder)
    path = (folder.parent if folder.is_file() else folder) / file
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TemplateError(f"The word table {path} could not be read ({exc}): restore it from the checkout.") from exc

    def regex(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: regex(v) for k, v in value.items()}
        return "|".join(map(str, value)) if isinstance(value, list) else str(value)

    return regex(data or {})


def list_families(root: Path | None = None) -> list[Manifest]:
    root = root or templates_root()
    return [load_family(p.parent.name, root) for p in sorted(root.glob(f"*/{MANIFEST}"))]


def supported_text(root: Path | None = None) -> str:
    try:
        names = [m.name for m in list_families(root)]
    except TemplateError:
        names = []
    return f"Supported template families: {', '.join(names) or '(none found)'}."
