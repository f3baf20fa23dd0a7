"""What the skills quote must be true of the code today, so drift fails here instead of misleading an agent:
HTTP endpoints and their methods, TrainJob config keys (and Literal/Enum values), TaskSpec and manifest
fields, VIBE_RL_* env vars, the helper scripts' flags, and the messages an agent is told to look for."""

from __future__ import annotations

import re
import subprocess
import sys
import typing
from enum import Enum
from pathlib import Path

import yaml
from pydantic import BaseModel
from skillpack import REPO, SKILLS_DIR

PAGES = sorted(SKILLS_DIR.rglob("*.md"))
SCRIPTS = sorted(SKILLS_DIR.glob("*/scripts/*.py"))
TEXTS = PAGES + SCRIPTS

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")


def code_texts(markdown: str) -> list[str]:
    """Fenced code blocks and inline code spans (outside fences)."""
    return [m.group(1) for m in _FENCE.finditer(markdown)] + _INLINE.findall(_FENCE.sub("", markdown))


def _code_of(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return code_texts(text) if path.suffix == ".md" else [text]


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def _source() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "vibe_rl").rglob("*.py")))


# ---------------------------------------------------------------- endpoints

_ENDPOINT = re.compile(r"(?:\b(GET|POST)\s+)?(?<![\w/.-])(/(?:control|episode|v1)/[A-Za-z0-9_/{}.-]*[A-Za-z0-9_}]"
                       r"|/healthz)\b")


def endpoint_mentions(text: str) -> list[tuple[str | None, str]]:
    return [(m.group(1), m.group(2)) for m in _ENDPOINT.finditer(text)]


def server_routes() -> list[tuple[str, re.Pattern]]:
    """(method, path pattern) of every route the swarm server serves (its one route table)."""
    from vibe_rl.swarm.server.routes import ROUTES

    return [(r.method, re.compile(re.escape(r.path) + ("(/.*)?$" if r.prefix else "$"))) for r in ROUTES]


def test_the_endpoint_scanner_sees_methods_and_rejects_unknown_routes():
    found = endpoint_mentions("GET /control/status?x=1, `POST /episode/begin`, /control/frob and /control/*")
    assert found == [("GET", "/control/status"), ("POST", "/episode/begin"), (None, "/control/frob")]
    routes = server_routes()
    assert any(m == "GET" and p.match("/control/status") for m, p in routes)
    assert not any(p.match("/control/frob") for _, p in routes)
    assert not any(m == "GET" and p.match("/episode/begin") for m, p in routes)


def test_every_endpoint_the_skills_name_is_served():
    routes, problems, seen = server_routes(), [], 0
    for path in TEXTS:
        for method, endpoint in endpoint_mentions(path.read_text(encoding="utf-8")):
            seen += 1
            methods = {m for m, p in routes if p.match(endpoint)}
            if not methods:
                problems.append(f"{_rel(path)}: {endpoint} is not a route of the swarm server")
            elif method and method not in methods:
                problems.append(f"{_rel(path)}: {method} {endpoint}, but the server answers {sorted(methods)}")
    assert not problems, "\n".join(problems)
    assert seen >= 5, f"suspiciously few endpoint mentions found: {seen}"


# ---------------------------------------------------------------- TrainJob keys

_KEY = re.compile(r"(?<![\w.\-/])(model|train|rollout|experiment)\.([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)"
                  r"(?:\s*[:=]\s*([\w.\-]+))?")


def _allowed(annotation) -> set[str] | None:
    """The values a Literal or Enum field takes (None: any)."""
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return {str(e.value) for e in annotation}
    if typing.get_origin(annotation) is typing.Literal:
        return {str(v) for v in typing.get_args(annotation)}
    return None


def resolve_key(dotted: str, value: str | None) -> str | None:
    """Why `dotted` (e.g. 'model.lora.rank') is not a TrainJob key, or why `value` is not allowed; None if fine."""
    from vibe_rl.schema import TrainJob

    model: type[BaseModel] = TrainJob
    parts = dotted.split(".")
    for i, name in enumerate(parts):
        field = model.model_fields.get(name)
        if field is None:
            return f"`{'.'.join(parts[:i + 1])}` is not a TrainJob key (known: {sorted(model.model_fields)})"
        annotation = field.annotation
        if i < len(parts) - 1:
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return f"`{'.'.join(parts[:i + 1])}` has no sub-keys"
            model = annotation
        elif value is not None and (allowed := _allowed(annotation)) is not None and value not in allowed:
            return f"`{dotted}` does not take {value!r} (one of {sorted(allowed)})"
    return None


def test_the_key_resolver_rejects_wrong_keys_and_values():
    assert resolve_key("model.lora.rank", "8") is None and resolve_key("train.policy", "non_dummy_tasks") is None
    assert "not a TrainJob key" in resolve_key("train.learning_rate", None)
    assert "does not take" in resolve_key("model.dtype", "fp8")
    assert [m.group(0) for m in _KEY.finditer("--set train.lr=0.1; job.train.lr; model.path: tiny; training.x")] \
        == ["train.lr=0.1", "model.path: tiny"]


def test_every_config_key_the_skills_name_exists():
    problems, seen = [], 0
    for path in TEXTS:
        for code in _code_of(path):
            for m in _KEY.finditer(code):
                seen += 1
                why = resolve_key(f"{m.group(1)}.{m.group(2)}", m.group(3) and m.group(3).rstrip("."))
                if why:
                    problems.append(f"{_rel(path)}: {m.group(0)} -> {why}")
    assert not problems, "\n".join(problems)
    assert seen >= 10, f"suspiciously few config keys found: {seen}"


# ---------------------------------------------------------------- TaskSpec fields, template families, manifest

def _table_rows(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in markdown.splitlines()
            if line.startswith("|") and not re.match(r"^\|[\s|:-]+\|$", line.strip())]


def _sub_model(field) -> type[BaseModel] | None:
    for t in (field.annotation, *typing.get_args(field.annotation)):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def test_taskspec_review_names_real_fields_and_families():
    from vibe_rl.schema.spec import TaskSpec

    text = (SKILLS_DIR / "vibe-rl-new" / "references" / "taskspec-review.md").read_text(encoding="utf-8")
    families = {p.parent.name for p in (REPO / "templates").glob("*/manifest.yaml")} | {"custom"}
    problems, checked = [], 0
    for row in _table_rows(text)[1:]:
        for name in _INLINE.findall(row[0]):
            field = TaskSpec.model_fields.get(name)
            if field is None:
                problems.append(f"`{name}` is not a TaskSpec field")
                continue
            checked += 1
            spans = [s for s in _INLINE.findall(row[1]) if re.fullmatch(r"[a-z_]+", s)]
            if name == "family":
                problems += [f"family `{s}` has no template folder" for s in spans if s not in families]
            elif (sub := _sub_model(field)) is not None:
                problems += [f"`{name}.{s}` is not a field of {sub.__name__}" for s in spans
                             if s not in sub.model_fields]
    assert not problems, "\n".join(problems)
    assert checked >= 10


def test_new_template_family_matches_the_manifest_schema_and_the_renderer():
    from vibe_rl.scaffold.families import DatasetInfo, Manifest, ModeInfo, Parameter, load_family
    from vibe_rl.scaffold.render import build_context
    from vibe_rl.schema.spec import TaskSpec

    text = (SKILLS_DIR / "vibe-rl-new" / "references" / "new-template-family.md").read_text(encoding="utf-8")
    block = re.search(r"^```yaml\n(.*?)^```", text, re.M | re.S).group(1)
    data = yaml.safe_load(block)
    assert set(data) <= set(Manifest.model_fields), set(data) - set(Manifest.model_fields)
    for param in data["parameters"].values():
        assert set(param) <= set(Parameter.model_fields), set(param) - set(Parameter.model_fields)
    assert set(data["dataset"]) <= set(DatasetInfo.model_fields)
    for mode in data.get("modes", []):
        assert set(mode) <= set(ModeInfo.model_fields), set(mode) - set(ModeInfo.model_fields)
    Manifest.model_validate(data)

    # the folder tree: every file it lists under project/ exists in some built-in family
    tree = re.search(r"^```\ntemplates/<family>/\n(.*?)^```", text, re.M | re.S).group(1)
    names = [line.split("#")[0].strip() for line in tree.splitlines()]
    shipped = {p.name for p in (REPO / "templates").glob("*/project/*")} | {
        p.name for p in (REPO / "templates").glob("*/*")} | {p.name for p in (REPO / "templates").glob("*/examples/*")}
    missing = [n for n in names if n and not n.endswith("/") and n not in shipped]
    assert not missing, f"new-template-family.md lists files no family has: {missing}"

    # "What templates see": the context keys build_context really passes
    section = text.split("## What templates see", 1)[1].split("\n## ", 1)[0]
    said = set(_INLINE.findall(section.split("The context holds:", 1)[1])) - {"StrictUndefined"}
    spec = TaskSpec.load(REPO / "generated" / "who_is_spy")
    context = build_context(spec, load_family(spec.family))
    assert said, "no context keys found in 'What templates see'"
    assert said <= set(context), f"templates do not see {sorted(said - set(context))}"


# ---------------------------------------------------------------- env vars

def test_every_env_var_the_skills_name_is_read_by_vibe_rl():
    known = _source() + "".join(p.read_text(encoding="utf-8") for p in (REPO / "scripts").glob("*.sh"))
    known += "".join(p.read_text(encoding="utf-8") for p in (REPO / "templates").rglob("*") if p.is_file()
                     and p.suffix in (".j2", ".py"))
    problems, seen = [], set()
    for path in TEXTS:
        for name in set(re.findall(r"\bVIBE_RL_[A-Z0-9_]+\b", path.read_text(encoding="utf-8"))):
            seen.add(name)
            if not re.search(rf"\b{name}\b", known):
                problems.append(f"{_rel(path)}: {name} is read nowhere in vibe_rl/, scripts/ or templates/")
    assert not problems, "\n".join(problems)
    assert {"VIBE_RL_SWARM_TOKEN_FILE", "VIBE_RL_TMUX_SOCKET"} <= seen


# ---------------------------------------------------------------- helper scripts' flags

_SCRIPT_CALL = re.compile(r"scripts/(\w+\.py)((?:[ \t]+(?:\\\n)?[^\s#|;&]+)*)")


def test_every_script_flag_the_skills_show_exists():
    helps = {}
    for script in SCRIPTS:
        out = subprocess.run([sys.executable, "-I", "-S", str(script), "--help"], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        helps[script.name] = out.stdout
    problems, seen = [], 0
    for page in PAGES:
        for code in code_texts(page.read_text(encoding="utf-8")):
            for m in _SCRIPT_CALL.finditer(code.replace("\\\n", " ")):
                if m.group(1) not in helps:
                    problems.append(f"{_rel(page)}: scripts/{m.group(1)} is not a script of the pack")
                    continue
                seen += 1
                flags = re.findall(r"(?<!\S)(--?[A-Za-z][\w-]*)", m.group(2))
                problems += [f"{_rel(page)}: scripts/{m.group(1)} has no {f}" for f in flags
                             if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", helps[m.group(1)])]
    assert not problems, "\n".join(problems)
    assert seen >= 4, f"suspiciously few script calls found: {seen}"


# ---------------------------------------------------------------- messages an agent is told to look for

# Messages printed by the OS, torch, the dynamic loader or the shell (not vibe-rl); each is still recognised by
# vibe-rl's own diagnosis regexes where it matters (checked below through vibe_rl.autopilot.diagnose).
EXTERNAL = {"undefined symbol", "npx: command not found"}
_PLACEHOLDER = re.compile(r"'[^']*'|\.\.\.|<[^>]+>|\b[A-Z]\b")


def quoted_messages(markdown: str) -> list[str]:
    """Code spans in the places that quote what an agent will see: the first column of tables headed 'Note',
    'What you see' or 'Symptom', the Evidence/Confirm bullets of failure pages, and a span right after
    'says', 'printed as' or 'prints' in prose."""
    spans, header = [], None
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells[0]
            elif header in ("Note", "What you see", "Symptom") and not re.fullmatch(r"[\s:-]*", cells[0]):
                spans += _INLINE.findall(cells[0])
        else:
            header = None
    for bullet in re.findall(r"^- \*\*(?:Evidence|Confirm)\*\*:(.*?)(?=^- |^#|^$|\Z)", markdown, re.M | re.S):
        spans += _INLINE.findall(bullet)
    spans += re.findall(r"\b(?:says|printed as|prints)\s+`([^`\n]+)`", _FENCE.sub("", markdown))
    return spans


def message_problem(span: str, source: str, recognisers: list[re.Pattern]) -> str | None:
    """Why `span` is neither produced by vibe-rl, nor a field/state name it uses, nor recognised by its diagnosis."""
    if span in EXTERNAL or "/" in span or span.startswith(("vibe-rl ", "python ", "tmux ")):
        return None  # external text; paths, endpoints and commands have their own tests
    if re.fullmatch(r"[A-Za-z_][\w.]*", span):  # a status key, a state, a field: the last part must exist
        last = span.split(".")[-1]
        return None if re.search(rf"\b{re.escape(last)}\b", source) else f"`{span}`: no `{last}` in vibe_rl/"
    if " " not in span.strip():
        return None  # a value such as `spy:*` or `qwen-max`, not a message
    if any(r.search(span) for r in recognisers):
        return None
    fragments = [f.strip(" .,;:") for f in _PLACEHOLDER.split(span)]
    missing = [f for f in fragments if len(f) >= 4 and f not in source]
    return f"`{span}`: vibe_rl/ never writes {missing}" if missing else None


def test_the_message_checker_rejects_invented_messages():
    from vibe_rl.autopilot import diagnose

    recognisers = [diagnose._OOM, diagnose._PORT, diagnose._EMPTY_TASK]
    source = "x = f'{name}: the last {streak} updates had zero gradient'\nnan_skipped = 1"
    assert message_problem("the last K updates had zero gradient", source, recognisers) is None
    assert message_problem("last_update.nan_skipped", source, recognisers) is None
    assert message_problem("[Errno 98]", source, recognisers) is None
    assert message_problem("the last K updates were frozen", source, recognisers) is not None
    assert message_problem("last_update.nan_count", source, recognisers) is not None
    table = ("| Note | Fix |\n|---|---|\n| `A thing` | `not this` |\n\n- **Evidence**: `B thing` here.\n\n"
             "It says `C thing`, not `D thing`.\n")
    assert quoted_messages(table) == ["A thing", "B thing", "C thing"]


def test_every_message_the_skills_quote_is_real():
    from vibe_rl.autopilot import diagnose

    recognisers = [v for v in vars(diagnose).values() if isinstance(v, re.Pattern)]
    source = _source()
    problems, seen = [], 0
    for page in PAGES:
        for span in quoted_messages(page.read_text(encoding="utf-8")):
            seen += 1
            why = message_problem(span, source, recognisers)
            if why:
                problems.append(f"{_rel(page)}: {why}")
    assert not problems, "skills quote messages or keys the code does not have:\n" + "\n".join(problems)
    assert seen >= 30, f"suspiciously few quoted messages found: {seen}"


# ---------------------------------------------------------------- client API attributes

_ATTR = re.compile(r"(?<![\w/.>])(swarm(?:_\d)?|ep|eps|job|creds)\.([a-z_]\w*)")


def client_objects() -> dict[str, object]:
    """One real object per name the skills use: `swarm`, `ep`, `eps`, `job`, `creds`."""
    from vibe_rl.swarm import Episode, Episodes, OpenaiBaseUrlAndApiKey, SwarmClient, Task, TrainJob

    creds = OpenaiBaseUrlAndApiKey(base_url="http://127.0.0.1:9/v1", api_key="k", model="m")
    swarm = SwarmClient("http://127.0.0.1:9", token="x" * 16)
    ep = Episode(swarm, "uuid", creds, Task(task_id="1"))
    return {"swarm": swarm, "ep": ep, "eps": Episodes(one=ep), "job": TrainJob(), "creds": creds}


def test_every_client_attribute_the_skills_use_exists():
    objects, problems, seen = client_objects(), [], 0
    try:
        for path in TEXTS:
            for code in _code_of(path):
                for m in _ATTR.finditer(code):
                    seen += 1
                    name = re.sub(r"_\d$", "", m.group(1))
                    if not hasattr(objects[name], m.group(2)):
                        problems.append(f"{_rel(path)}: {m.group(0)}: {type(objects[name]).__name__} has no "
                                        f"{m.group(2)!r}")
    finally:
        objects["swarm"].close()
    assert not problems, "\n".join(problems)
    assert seen >= 10, f"suspiciously few client attributes found: {seen}"
