"""Werewolves rules: pure game logic, no LLM. Decisions come from a `Decider` (LLM players, or a script).

Setup: a role table (`Game.deal(roles=...)`; DEFAULT_ROLES, the standard 9 players: 3 werewolves, 1 seer,
1 witch, 1 hunter, 3 villagers), seated in a seeded random order. A role with no seat simply never acts.
Sides: the werewolves against the village (the "gods" seer, witch and hunter, plus the villagers).

Night, in this order:
  1. Each living werewolf votes for a victim among the living non-werewolves. Most votes wins; a tie goes
     to the tied target picked by the lowest-seated werewolf among those who voted for a tied target.
     No valid vote: nobody is attacked.
  2. The seer checks one living player other than herself and privately learns "werewolf" or "good".
  3. The witch learns the victim while she still holds her save potion. She may save the victim (one
     save potion per game; she may save herself on night 1 only). If she did not save anyone tonight,
     she may poison one living player other than herself (one poison potion per game).
Dawn: the night's deaths are announced in seat order, without their cause. A hunter who died at night
  shoots one living player (or holds fire) - unless he was poisoned, which silences his gun.
Day: the living players speak in seat order, then each votes to eliminate another living player.
  Most votes wins; a tie eliminates nobody. An eliminated hunter shoots.
Win (checked after every death): the village wins when every werewolf is dead. The werewolves win with
  win_rule="parity" (default) when living werewolves >= living non-werewolves, or with win_rule="side"
  when every villager or every god is dead (a group the table seats none of never counts as dead).
  A game still open after `max_days` days is a draw.
An invalid choice (not among the offered options) counts as an abstention and is counted in
`invalid_actions`, so nothing is dropped silently.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

WEREWOLF, SEER, WITCH, HUNTER, VILLAGER = "werewolf", "seer", "witch", "hunter", "villager"
GODS = (SEER, WITCH, HUNTER)
DEFAULT_ROLES = {WEREWOLF: 3, SEER: 1, WITCH: 1, HUNTER: 1, VILLAGER: 3}
SKIP, SAVE = "skip", "save"
WEREWOLVES_WIN, VILLAGE_WIN, DRAW = "werewolves", "village", "draw"


@dataclass
class Player:
    pid: str
    name: str
    role: str
    alive: bool = True

    @property
    def side(self) -> str:
        return side_of(self.role)


class Decider(Protocol):
    """Who makes the players' choices: an LLM client in agent_run.py, a script in the tests."""

    def choose(self, game: Game, player: Player, action: str, options: list[str]) -> str: ...

    def speak(self, game: Game, player: Player) -> str: ...


@dataclass
class Game:
    players: list[Player]
    win_rule: str = "parity"
    max_days: int = 12
    day: int = 0
    has_save: bool = True
    has_poison: bool = True
    winner: str | None = None
    public_log: list[str] = field(default_factory=list)
    private_log: dict[str, list[str]] = field(default_factory=dict)
    invalid_actions: int = 0

    # ---- setup and queries ----
    @classmethod
    def deal(cls, player_ids: list[str], names: list[str], seed: int, roles: dict[str, int] | None = None,
             **kwargs) -> Game:
        """Seat the players in a seeded order and deal the roles."""
        deck = [role for role, count in (roles or DEFAULT_ROLES).items() for _ in range(count)]
        if len(deck) != len(player_ids) or len(names) != len(player_ids):
            raise ValueError(f"{len(player_ids)} players and {len(names)} names for {len(deck)} roles")
        rng = random.Random(seed)
        rng.shuffle(deck)
        game = cls([Player(pid, name, role) for pid, name, role in zip(player_ids, names, deck, strict=True)], **kwargs)
        wolves = ", ".join(p.pid for p in game.with_role(WEREWOLF))
        for p in game.players:
            game.note(p.pid, f"You are {p.pid} ({p.name}); your role is {p.role}.")
            if p.role == WEREWOLF:
                game.note(p.pid, f"The werewolves are: {wolves}.")
        return game

    def note(self, pid: str, text: str) -> None:
        """Tell one player something privately."""
        self.private_log.setdefault(pid, []).append(text)

    def get(self, pid: str) -> Player:
        return next(p for p in self.players if p.pid == pid)

    def living(self) -> list[Player]:
        return [p for p in self.players if p.alive]

    def with_role(self, role: str, alive_only: bool = False) -> list[Player]:
        return [p for p in self.players if p.role == role and (p.alive or not alive_only)]

    def ids(self, players: list[Player], exclude: str | None = None) -> list[str]:
        return [p.pid for p in players if p.pid != exclude]

    def check_winner(self) -> str | None:
        """Set and return the winner, if the game is decided."""
        wolves = len(self.with_role(WEREWOLF, alive_only=True))
        others = len(self.living()) - wolves
        if wolves == 0:
            self.winner = VILLAGE_WIN
        elif self.win_rule == "parity" and wolves >= others:
            self.winner = WEREWOLVES_WIN
        elif self.win_rule == "side" and any(
                not any(p.alive and p.role in group for p in self.players)
                for group in ((VILLAGER,), GODS) if any(p.role in group for p in self.players)):
            self.winner = WEREWOLVES_WIN
        return self.winner

    def _ask(self, decider: Decider, player: Player, action: str, options: list[str]) -> str:
        choice = decider.choose(self, player, action, options)
        if choice not in options:
            self.invalid_actions += 1
            return SKIP
        return choice

    # ---- night ----
    def wolf_target(self, votes: dict[str, str]) -> str | None:
        """Most votes among living non-werewolves; a tie goes to the lowest-seated wolf's choice."""
        valid = {w: t for w, t in votes.items() if t in self.ids([p for p in self.living() if p.role != WEREWOLF])}
        if not valid:
            return None
        counts = Counter(valid.values())
        best = max(counts.values())
        tied = {t for t, c in counts.items() if c == best}
        seat = {p.pid: i for i, p in enumerate(self.players)}
        leader = min((w for w, t in valid.items() if t in tied), key=seat.__getitem__)
        return valid[leader]

    def seer_check(self, seer: Player, target: str) -> str:
        result = WEREWOLF if self.get(target).role == WEREWOLF else "good"
        self.note(seer.pid, f"Night {self.day}: you checked {target}: {result}.")
        return result

    def can_save(self, witch: Player, victim: str | None) -> bool:
        return self.has_save and victim is not None and (victim != witch.pid or self.day == 1)

    def night(self, decider: Decider) -> list[str]:
        """Play one night; return the dead (in seat order) before the hunter shoots."""
        self.day += 1
        wolves = self.with_role(WEREWOLF, alive_only=True)
        prey = self.ids([p for p in self.living() if p.role != WEREWOLF])
        victim = self.wolf_target({w.pid: self._ask(decider, w, "wolf_kill", prey) for w in wolves})
        for w in wolves:
            self.note(w.pid, f"Night {self.day}: the pack attacks {victim or 'nobody'}.")
        for seer in self.with_role(SEER, alive_only=True):
            target = self._ask(decider, seer, "seer_check", self.ids(self.living(), exclude=seer.pid))
            if target != SKIP:
                self.seer_check(seer, target)
        saved, poisoned = False, None
        for witch in self.with_role(WITCH, alive_only=True):
            if self.has_save:
                self.note(witch.pid, f"Night {self.day}: the werewolves attack {victim or 'nobody'}.")
            if self.can_save(witch, victim) and self._ask(decider, witch, "witch_save", [SAVE, SKIP]) == SAVE:
                saved, self.has_save = True, False
            elif self.has_poison:
                target = self._ask(decider, witch, "witch_poison", self.ids(self.living(), exclude=witch.pid) + [SKIP])
                if target != SKIP:
                    poisoned, self.has_poison = target, False
        dead = {victim} if victim and not saved else set()
        dead |= {poisoned} if poisoned else set()
        order = [p.pid for p in self.players if p.pid in dead]
        for pid in order:
            self.get(pid).alive = False
        self.public_log.append(f"Night {self.day}: " + (f"{', '.join(order)} died." if order else "nobody died."))
        for pid in order:
            if self.get(pid).role == HUNTER and pid != poisoned:
                self.hunter_shoots(decider, self.get(pid))
        self.check_winner()
        return order

    # ---- day ----
    def hunter_shoots(self, decider: Decider, hunter: Player) -> str | None:
        target = self._ask(decider, hunter, "hunter_shoot", self.ids(self.living()) + [SKIP])
        if target == SKIP:
            self.public_log.append(f"Day {self.day}: the hunter {hunter.pid} held fire.")
            return None
        self.get(target).alive = False
        self.public_log.append(f"Day {self.day}: the hunter {hunter.pid} shot {target}.")
        return target

    def vote_out(self, votes: dict[str, str]) -> str | None:
        """Most votes among living players wins; a tie eliminates nobody."""
        living = self.ids(self.living())
        counts = Counter(t for v, t in votes.items() if t in living and t != v)
        if not counts:
            return None
        (top, best), *rest = counts.most_common()
        return None if rest and rest[0][1] == best else top

    def daytime(self, decider: Decider) -> str | None:
        """Speeches, vote and elimination; return the eliminated player, if any."""
        for p in self.living():
            self.public_log.append(f"Day {self.day}, {p.pid} says: {decider.speak(self, p).strip()[:600]}")
        votes = {p.pid: self._ask(decider, p, "day_vote", self.ids(self.living(), exclude=p.pid))
                 for p in self.living()}
        shown = ", ".join(f"{v}->{t}" for v, t in votes.items())
        out = self.vote_out(votes)
        result = f"{out} is eliminated." if out else "Tie: nobody is eliminated."
        self.public_log.append(f"Day {self.day} votes: {shown}. {result}")
        if out:
            self.get(out).alive = False
            if self.get(out).role == HUNTER:
                self.hunter_shoots(decider, self.get(out))
        self.check_winner()
        return out

    def play(self, decider: Decider) -> str:
        """Alternate nights and days until a side wins; return the winner."""
        while self.winner is None and self.day < self.max_days:
            self.night(decider)
            if self.winner is None:
                self.daytime(decider)
        self.winner = self.winner or DRAW
        self.public_log.append(f"Game over after {self.day} day(s): {self.winner}.")
        return self.winner


def side_of(role: str) -> str:
    """The side a role plays for: WEREWOLVES_WIN or VILLAGE_WIN (the winner a game names when that side wins)."""
    return WEREWOLVES_WIN if role == WEREWOLF else VILLAGE_WIN


def reward_for(role: str, winner: str) -> float:
    """1 when the player's side won, 0 otherwise (a draw pays nobody)."""
    return 1.0 if winner == side_of(role) else 0.0
