"""Who is Spy: the pure rules (no LLM, no I/O).

- Civilians share one word; spies get a similar but different word.
- Each round every living player describes their word (without saying it), then everyone votes.
- The player with the most valid votes is eliminated. Tie rule: if several players share the most
  votes (or nobody cast a valid vote), nobody is eliminated that round.
- A vote is valid when its target is a living player other than the voter; other votes are abstentions.
- Civilians win as soon as every spy is out. Spies win once spies >= civilians.
- If MAX_ROUNDS pass without a winner, the spies win: they were never caught.
- Ids are player_1 .. player_N dealt at random, so an id says nothing about a role.

Rewards: `outcome_reward` (win or loss) by default. `SHAPED_REWARD` (the family's `shaped_reward`
parameter) switches to `shaped_reward`, which adds dense credit a small model can earn before it
ever wins a game: civilians for legal ballots and for ballots that named a spy, spies for each
round they survived.
"""

import random
from dataclasses import dataclass, field

CIVILIAN, SPY = "civilian", "spy"
NUM_PLAYERS = 6
NUM_SPIES = 1
MAX_ROUNDS = 6
SHAPED_REWARD = False
SHAPING = 0.5  # weight of each dense term of the shaped reward
HIT_CREDIT = 1.0  # share of SHAPING a civilian ballot that named a spy earns


@dataclass
class Player:
    pid: str
    name: str
    role: str
    word: str
    alive: bool = True


@dataclass
class Game:
    players: list[Player]
    civilian_word: str
    spy_word: str
    max_rounds: int = MAX_ROUNDS
    round: int = 1
    descriptions: list[tuple[int, str, str]] = field(default_factory=list)  # (round, pid, text)
    eliminated: list[tuple[int, str]] = field(default_factory=list)  # (round, pid)
    ballots: list[tuple[int, str, str | None]] = field(default_factory=list)  # (round, voter, legal target or None)

    def player(self, pid: str) -> Player:
        return next(p for p in self.players if p.pid == pid)

    def alive(self, role: str | None = None) -> list[Player]:
        return [p for p in self.players if p.alive and role in (None, p.role)]

    def describe(self, pid: str, text: str) -> str:
        """Record a description; a player who says their own word has it masked."""
        player = self.player(pid)
        text = " ".join(text.split())
        for word in {player.word, player.word.lower(), player.word.capitalize()}:
            text = text.replace(word, "***")
        self.descriptions.append((self.round, pid, text))
        return text

    def vote(self, ballots: dict[str, str | None]) -> str | None:
        """Count one round of ballots (voter -> target), eliminate the top player, start the next round."""
        living = {p.pid for p in self.alive()}
        counts: dict[str, int] = {}
        for voter, target in ballots.items():
            legal = voter in living and target in living and target != voter
            if legal:
                counts[target] = counts.get(target, 0) + 1
            if voter in living:
                self.ballots.append((self.round, voter, target if legal else None))
        out = None
        if counts:
            top = max(counts.values())
            leaders = [pid for pid, n in counts.items() if n == top]
            if len(leaders) == 1:
                out = leaders[0]
                self.player(out).alive = False
                self.eliminated.append((self.round, out))
        self.round += 1
        return out

    def winner(self) -> str | None:
        spies, civilians = len(self.alive(SPY)), len(self.alive(CIVILIAN))
        if spies == 0:
            return CIVILIAN
        if spies >= civilians or self.round > self.max_rounds:
            return SPY
        return None


def outcome_reward(game: Game, role: str, win: float = 1.0, loss: float = 0.0) -> float:
    return win if game.winner() == role else loss


def shaped_reward(game: Game, role: str, win: float = 1.0, loss: float = 0.0,
                  seats: list[str] | None = None) -> float:
    """The outcome plus SHAPING x each dense term (every term is a share in [0, 1]):
    civilians: legal ballots / their ballots, and HIT_CREDIT x ballots that named a spy / their ballots;
    spies: rounds each spy was alive at the vote / rounds played (averaged over the spies).
    The dense terms count the ballots (or survival) of `seats` (player ids of `role`; default: all of them),
    so `seats=[pid]` is that player's own reward; the outcome is always the side's."""
    total = outcome_reward(game, role, win, loss)
    mine = set(seats) if seats is not None else {p.pid for p in game.players if p.role == role}
    if role == CIVILIAN:
        cast = [target for _, voter, target in game.ballots if voter in mine]
        if cast:
            legal = sum(target is not None for target in cast) / len(cast)
            hits = sum(target is not None and game.player(target).role == SPY for target in cast) / len(cast)
            total += SHAPING * (legal + HIT_CREDIT * hits)
    else:
        played = game.round - 1
        out = {pid: when for when, pid in game.eliminated}
        spies = [p.pid for p in game.players if p.role == SPY and p.pid in mine]
        if played and spies:
            survived = sum(min(out.get(pid, played + 1) - 1, played) for pid in spies) / (len(spies) * played)
            total += SHAPING * survived
    return round(total, 6)


def side_reward(game: Game, role: str, win: float = 1.0, loss: float = 0.0, seats: list[str] | None = None) -> float:
    """The reward of one side (or of its `seats`): shaped when SHAPED_REWARD is on, else win or loss."""
    if SHAPED_REWARD:
        return shaped_reward(game, role, win, loss, seats)
    return outcome_reward(game, role, win, loss)


def new_game(civilian_word: str, spy_word: str, names: list[str], rng: random.Random,
             num_players: int = NUM_PLAYERS, num_spies: int = NUM_SPIES, max_rounds: int = MAX_ROUNDS) -> Game:
    """Deal roles, ids and names at random. Needs spies < civilians, else the spies would win at once."""
    if num_spies < 1 or 2 * num_spies >= num_players:
        raise ValueError(f"need 1 <= spies < civilians, got {num_spies} spies among {num_players} players")
    if len(names) < num_players:
        raise ValueError(f"need {num_players} names, got {len(names)}")
    ids = rng.sample(range(1, num_players + 1), num_players)
    picked = rng.sample(names, num_players)
    spies = set(rng.sample(range(num_players), num_spies))
    players = []
    for i in range(num_players):
        role, word = (SPY, spy_word) if i in spies else (CIVILIAN, civilian_word)
        players.append(Player(f"player_{ids[i]}", picked[i], role, word))
    return Game(players, civilian_word, spy_word, max_rounds)
