"""Trace audit: did every player's calls reach the model its team should use?

Input: the calls each server recorded (`GET /control/traces`), keyed by server name, and the
expected target of each role (`TaskSpec.model_for_role`). A call tagged "<role>:<player_id>"
is right when it was served by the role's trainable server, or, for a role wired to a static
model, forwarded by name to that static model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Expected:
    """Where one role's calls must go (mirrors schema.spec.RoleModel)."""

    kind: str  # "server" | "static"
    name: str  # server name or static model name
    team: str = ""


@dataclass
class AuditResult:
    checked: int = 0
    mismatches: list[str] = field(default_factory=list)  # human lines
    players: list[str] = field(default_factory=list)  # "<role>:<player_id>" that went wrong
    untagged: int = 0
    unknown_roles: list[str] = field(default_factory=list)
    roles_seen: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def render(self) -> str:
        head = f"trace audit: {self.checked} tagged calls checked"
        if self.untagged:
            head += f", {self.untagged} calls without a player tag (not checked)"
        if self.unknown_roles:
            head += f", unknown roles {sorted(set(self.unknown_roles))} (not checked)"
        return "\n".join([head + (": OK" if self.ok else ": FAILED")] + ["  " + m for m in self.mismatches])


def _describe(server: str, call: Mapping[str, Any]) -> str:
    if call.get("static"):
        return f"static model {call.get('model')!r} (via {server})"
    return f"trainable server {server!r} (model {call.get('model')!r})"


def audit_traces(calls_by_server: Mapping[str, list[Mapping[str, Any]]],
                 expected: Mapping[str, Expected]) -> AuditResult:
    """Check every tagged call against its role's expected target; one line per (player, wrong target)."""
    result = AuditResult()
    seen: dict[tuple[str, str], int] = {}
    for server, calls in calls_by_server.items():
        for call in calls:
            tag = str(call.get("player") or "")
            if ":" not in tag:
                result.untagged += 1
                continue
            role = tag.split(":", 1)[0]
            want = expected.get(role)
            if want is None:
                result.unknown_roles.append(role)
                continue
            result.checked += 1
            result.roles_seen.add(role)
            if want.kind == "server":
                good = not call.get("static") and server == want.name
                target = f"trainable server {want.name!r}"
            else:
                good = bool(call.get("static")) and call.get("model") == want.name
                target = f"static model {want.name!r}"
            if not good:
                key = (tag, _describe(server, call))
                seen[key] = seen.get(key, 0) + 1
                if seen[key] == 1:
                    result.players.append(tag) if tag not in result.players else None
                    team = f" (team {want.team})" if want.team else ""
                    result.mismatches.append(f"{tag}{team} should call {target} but called {key[1]}")
    for i, (tag, got) in enumerate(seen):
        result.mismatches[i] += f" [{seen[(tag, got)]} calls]"
    return result


def expected_from_spec(spec: Any, mode: str | None) -> dict[str, Expected]:
    """role -> Expected, from a TaskSpec (duck-typed: `roles` and `model_for_role`)."""
    out = {}
    for role in spec.roles:
        rm = spec.model_for_role(role, mode)
        out[role] = Expected(rm.kind, rm.name, rm.team)
    return out
