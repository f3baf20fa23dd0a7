"""Rules of game_engine.py: each role power, vote ties and both win conditions.

Run: python -m pytest test_game_engine.py
"""

import random
from collections import Counter

import pytest

import game_engine as ge

SEATS = ["werewolf", "werewolf", "werewolf", "seer", "witch", "hunter", "villager", "villager", "villager"]


def make_game(**kwargs):
    """p1-p3 werewolves, p4 seer, p5 witch, p6 hunter, p7-p9 villagers."""
    players = [ge.Player(f"p{i + 1}", f"name{i + 1}", role) for i, role in enumerate(SEATS)]
    return ge.Game(players, **kwargs)


class Script:
    """Answers from a plan {(action, pid): choice or [choices]}; otherwise a fixed default per action."""

    DEFAULTS = {"witch_save": "skip", "witch_poison": "skip", "hunter_shoot": "skip"}

    def __init__(self, plan=None):
        self.plan = dict(plan or {})
        self.asked: list[tuple[str, str, list[str]]] = []

    def choose(self, game, player, action, options):
        self.asked.append((action, player.pid, list(options)))
        answer = self.plan.get((action, player.pid))
        if isinstance(answer, list):
            answer = answer.pop(0) if answer else None
        if answer is None:
            answer = self.DEFAULTS.get(action, options[0])
        return answer

    def speak(self, game, player):
        return f"I am {player.pid} and I am innocent."

    def actions(self, action):
        return [a for a in self.asked if a[0] == action]


class RandomLegal(Script):
    def __init__(self, seed):
        super().__init__()
        self.rng = random.Random(seed)

    def choose(self, game, player, action, options):
        self.asked.append((action, player.pid, list(options)))
        return self.rng.choice(options)


# ---- setup ----

def test_deal_gives_nine_players_the_standard_roles_deterministically():
    ids, names = [f"player_{i}" for i in range(1, 10)], [f"N{i}" for i in range(9)]
    a = ge.Game.deal(ids, names, seed=7)
    b = ge.Game.deal(ids, names, seed=7)
    roles = sorted(p.role for p in a.players)
    assert roles == sorted(SEATS)
    assert [p.role for p in a.players] == [p.role for p in b.players]
    assert len({tuple(p.role for p in ge.Game.deal(ids, names, seed=s).players) for s in range(20)}) > 1
    wolves = {p.pid for p in a.players if p.role == "werewolf"}
    for p in a.players:
        knows = any("werewolves are" in line for line in a.private_log[p.pid])
        assert knows == (p.pid in wolves)
    with pytest.raises(ValueError):
        ge.Game.deal(ids[:8], names[:8], seed=1)


# ---- night: werewolves ----

def test_wolf_majority_picks_the_victim():
    game = make_game()
    assert game.wolf_target({"p1": "p7", "p2": "p7", "p3": "p8"}) == "p7"


def test_wolf_tie_goes_to_the_lowest_seated_wolf_among_tied_voters():
    game = make_game()
    assert game.wolf_target({"p1": "p8", "p2": "p7", "p3": "p9"}) == "p8"
    assert game.wolf_target({"p3": "p9", "p2": "p7"}) == "p7"  # p2 sits before p3
    game.get("p1").alive = False
    assert game.wolf_target({"p2": "p9", "p3": "p7"}) == "p9"


def test_wolf_votes_for_werewolves_or_dead_players_are_ignored():
    game = make_game()
    game.get("p7").alive = False
    assert game.wolf_target({"p1": "p2", "p2": "p7", "p3": "p8"}) == "p8"
    assert game.wolf_target({"p1": "p2", "p2": "p7", "p3": "nobody"}) is None


def test_night_kill_and_peaceful_night_when_no_valid_wolf_vote():
    game = make_game()
    dead = game.night(Script({("wolf_kill", w): "p9" for w in ("p1", "p2", "p3")}))
    assert dead == ["p9"] and not game.get("p9").alive
    assert game.public_log[-1] == "Night 1: p9 died."
    script = Script({("wolf_kill", w): "p1" for w in ("p1", "p2", "p3")})  # a wolf is not among the options
    assert game.night(script) == []
    assert game.invalid_actions == 3
    assert game.public_log[-1] == "Night 2: nobody died."
    assert all("p1" not in options for _, _, options in script.actions("wolf_kill"))


# ---- night: seer ----

def test_seer_learns_the_checked_role_privately():
    game = make_game()
    script = Script({("seer_check", "p4"): ["p2", "p7"]} | {("wolf_kill", w): ["p8", "p9"] for w in ("p1", "p2", "p3")})
    game.night(script)
    game.night(script)
    seer_notes = game.private_log["p4"]
    assert "Night 1: you checked p2: werewolf." in seer_notes
    assert "Night 2: you checked p7: good." in seer_notes
    assert not any("checked" in line for line in game.public_log)
    assert all("p4" not in options for _, _, options in script.actions("seer_check"))


def test_dead_seer_checks_nothing():
    game = make_game()
    game.get("p4").alive = False
    script = Script()
    game.night(script)
    assert script.actions("seer_check") == []


# ---- night: witch ----

def test_witch_save_spends_the_potion_and_the_victim_lives():
    game = make_game()
    wolves = {("wolf_kill", w): "p7" for w in ("p1", "p2", "p3")}
    script = Script({**wolves, ("witch_save", "p5"): "save"})
    assert game.night(script) == []
    assert game.get("p7").alive and not game.has_save and game.has_poison
    assert "Night 1: the werewolves attack p7." in game.private_log["p5"]
    # saving and poisoning in the same night is not allowed
    assert script.actions("witch_poison") == []
    # second night: no save potion left, so the witch is not even asked
    game.night(Script({**wolves, ("witch_save", "p5"): "save"}))
    assert not game.get("p7").alive


def test_witch_may_save_herself_on_night_one_only():
    game = make_game()
    at_witch = {("wolf_kill", w): "p5" for w in ("p1", "p2", "p3")}
    assert game.can_save(game.get("p5"), "p5") is False  # day 0: before the first night
    assert game.night(Script({**at_witch, ("witch_save", "p5"): "save"})) == []
    game2 = make_game()
    game2.night(Script())  # night 1: the wolves kill the first option, the witch does nothing
    script = Script({**at_witch, ("witch_save", "p5"): "save"})
    assert game2.night(script) == ["p5"]
    assert script.actions("witch_save") == []
    assert game2.has_save


def test_witch_poison_kills_once_per_game_and_not_herself():
    game = make_game()
    script = Script({("wolf_kill", w): "p9" for w in ("p1", "p2", "p3")} | {("witch_poison", "p5"): "p1"})
    assert game.night(script) == ["p1", "p9"]
    assert not game.has_poison
    assert all("p5" not in options for _, _, options in script.actions("witch_poison"))
    script2 = Script({("witch_poison", "p5"): "p2"})
    game.night(script2)
    assert game.get("p2").alive and script2.actions("witch_poison") == []


# ---- hunter ----

def test_hunter_killed_at_night_shoots():
    game = make_game()
    script = Script({("wolf_kill", w): "p6" for w in ("p1", "p2", "p3")} | {("hunter_shoot", "p6"): "p2"})
    assert game.night(script) == ["p6"]
    assert not game.get("p2").alive
    assert "the hunter p6 shot p2" in game.public_log[-1]


def test_poisoned_hunter_cannot_shoot():
    game = make_game()
    script = Script({("witch_poison", "p5"): "p6", ("hunter_shoot", "p6"): "p1"})
    game.night(script)
    assert not game.get("p6").alive and game.get("p1").alive
    assert script.actions("hunter_shoot") == []


def test_hunter_voted_out_by_day_shoots():
    game = make_game()
    game.day = 1
    plan = {("day_vote", p): "p6" for p in ("p1", "p2", "p3", "p4", "p5")}
    game.daytime(Script(plan | {("hunter_shoot", "p6"): "p3"}))
    assert not game.get("p6").alive and not game.get("p3").alive


def test_hunter_may_hold_fire():
    game = make_game()
    game.day = 1
    game.hunter_shoots(Script({("hunter_shoot", "p6"): "skip"}), game.get("p6"))
    assert len(game.living()) == 9 and "held fire" in game.public_log[-1]


# ---- day vote ----

def test_day_vote_majority_eliminates():
    game = make_game()
    assert game.vote_out({"p1": "p7", "p2": "p7", "p4": "p1"}) == "p7"


def test_day_vote_tie_eliminates_nobody():
    game = make_game()
    game.day = 1
    assert game.vote_out({"p1": "p7", "p2": "p8"}) is None
    votes = {"p1": "p7", "p2": "p7", "p3": "p8", "p4": "p8", "p5": "p9"}
    plan = {("day_vote", k): v for k, v in votes.items()}
    plan |= {("day_vote", p): "skip" for p in ("p6", "p7", "p8", "p9")}
    assert game.daytime(Script(plan)) is None
    assert len(game.living()) == 9 and "Tie: nobody is eliminated." in game.public_log[-1]


def test_day_vote_ignores_self_votes_and_dead_targets():
    game = make_game()
    game.get("p9").alive = False
    assert game.vote_out({"p1": "p1", "p2": "p9", "p3": "p8"}) == "p8"
    assert game.vote_out({"p1": "p1"}) is None


# ---- win conditions ----

def test_village_wins_when_every_werewolf_is_dead():
    game = make_game()
    for pid in ("p1", "p2"):
        game.get(pid).alive = False
    assert game.check_winner() is None
    game.day = 1
    plan = {("day_vote", p): "p3" for p in ("p4", "p5", "p6", "p7", "p8")}
    assert game.daytime(Script(plan)) == "p3"
    assert game.winner == "village"


def test_werewolves_win_at_parity():
    game = make_game()
    for pid in ("p4", "p5"):
        game.get(pid).alive = False
    assert game.check_winner() is None  # 3 wolves vs 4 others
    game.get("p7").alive = False
    assert game.check_winner() == "werewolves"  # 3 wolves vs 3 others


def test_werewolves_win_at_parity_after_a_night_kill():
    game = make_game()
    for pid in ("p4", "p5", "p7", "p8"):
        game.get(pid).alive = False
    game.night(Script({("wolf_kill", w): "p9" for w in ("p1", "p2", "p3")}))
    assert game.winner == "werewolves"  # 3 wolves vs the hunter alone


def test_side_rule_wins_when_all_gods_or_all_villagers_die():
    for rule, expected in (("side", "werewolves"), ("parity", None)):
        game = make_game(win_rule=rule)
        for pid in ("p1", "p4", "p5", "p6"):  # one wolf and every god: 2 wolves vs 3 villagers
            game.get(pid).alive = False
        assert game.check_winner() == expected
        game = make_game(win_rule=rule)
        for pid in ("p1", "p7", "p8", "p9"):  # one wolf and every villager: 2 wolves vs 3 gods
            game.get(pid).alive = False
        assert game.check_winner() == expected


def test_hunter_shot_can_end_the_game_for_the_village():
    game = make_game()
    for pid in ("p1", "p2"):
        game.get(pid).alive = False
    script = Script({("wolf_kill", "p3"): "p6", ("hunter_shoot", "p6"): "p3"})
    game.night(script)
    assert game.winner == "village"


def test_full_games_with_random_legal_players_end_with_a_legal_winner():
    winners = set()
    for seed in range(40):
        ids, names = [f"player_{i}" for i in range(1, 10)], [f"N{i}" for i in range(9)]
        game = ge.Game.deal(ids, names, seed=seed)
        winner = game.play(RandomLegal(seed))
        assert winner in {"village", "werewolves", "draw"}
        assert game.invalid_actions == 0
        assert game.public_log[-1].startswith("Game over")
        if winner == "village":
            assert not game.with_role("werewolf", alive_only=True)
        if winner == "werewolves":
            wolves = len(game.with_role("werewolf", alive_only=True))
            assert wolves >= len(game.living()) - wolves
        winners.add(winner)
    assert {"village", "werewolves"} <= winners


def test_game_that_never_resolves_is_a_draw_after_max_days():
    game = make_game(max_days=3)
    # wolves never vote validly, the day always ties: nobody ever dies
    plan = {("wolf_kill", w): "nobody" for w in ("p1", "p2", "p3")}
    winner = game.play(Script(plan | {("day_vote", p): "skip" for p in [f"p{i}" for i in range(1, 10)]}))
    assert winner == "draw" and game.day == 3


def test_rewards_follow_the_players_side():
    assert ge.reward_for("werewolf", "werewolves") == 1.0
    assert ge.reward_for("seer", "werewolves") == 0.0
    assert ge.reward_for("seer", "village") == 1.0
    assert ge.reward_for("werewolf", "draw") == ge.reward_for("villager", "draw") == 0.0
    assert ge.side_of("werewolf") == "werewolves" and ge.side_of("witch") == ge.side_of("villager") == "village"


# ---- other role tables ----

class VillageHunts(Script):
    """The village votes out the first werewolf it is offered, the werewolves the first non-werewolf; the
    werewolves attack the first option; the witch and the hunter (when seated) do nothing."""

    def choose(self, game, player, action, options):
        if action == "day_vote":
            self.asked.append((action, player.pid, list(options)))
            wolves = [o for o in options if game.get(o).role == "werewolf"]
            others = [o for o in options if game.get(o).role != "werewolf"]
            return (others if player.role == "werewolf" else wolves or others)[0]
        return super().choose(game, player, action, options)


def deal(roles, seed=3, **kwargs):
    n = sum(roles.values())
    return ge.Game.deal([f"player_{i}" for i in range(1, n + 1)], [f"N{i}" for i in range(n)], seed=seed,
                        roles=roles, **kwargs)


def test_table_without_witch_and_hunter_plays_to_the_end():
    roles = {"werewolf": 2, "seer": 1, "witch": 0, "hunter": 0, "villager": 3}
    game = deal(roles)
    assert Counter(p.role for p in game.players) == {"werewolf": 2, "seer": 1, "villager": 3}
    script = VillageHunts()
    # night 1: 2 wolves vs 3; day 1: a wolf is out; night 2: 1 vs 2; day 2: the last wolf is out
    assert game.play(script) == "village" and game.day == 2
    assert not script.actions("witch_save") and not script.actions("witch_poison")
    assert not script.actions("hunter_shoot") and script.actions("seer_check")
    assert game.invalid_actions == 0 and game.public_log[-1] == "Game over after 2 day(s): village."
    # side rule: the seer is the only god, so killing her on night 1 wins for the werewolves
    game = deal(roles, win_rule="side")
    seer = game.with_role("seer")[0].pid
    assert game.play(Script({("wolf_kill", w.pid): seer for w in game.with_role("werewolf")})) == "werewolves"
    assert game.day == 1 and len(game.living()) == 5
    # a village that never votes anyone out loses at parity: 2 wolves vs 4, 3, then 2
    game = deal(roles)
    script = Script({("day_vote", p.pid): "skip" for p in game.players})
    assert game.play(script) == "werewolves" and game.day == 2
    assert len(game.with_role("werewolf", alive_only=True)) == 2 and len(game.living()) == 4


def test_twelve_players_play_to_the_end():
    roles = {"werewolf": 4, "seer": 1, "witch": 1, "hunter": 1, "villager": 5}
    game = deal(roles, seed=12)
    assert len(game.players) == 12 and Counter(p.role for p in game.players) == roles
    assert all(any("werewolves are" in line for line in game.private_log[p.pid]) == (p.role == "werewolf")
               for p in game.players)
    script = VillageHunts()
    assert game.play(script) == "village" and not game.with_role("werewolf", alive_only=True)
    assert game.invalid_actions == 0 and script.actions("seer_check") and script.actions("witch_poison")
    winners = {deal(roles, seed=s).play(RandomLegal(s)) for s in range(30)}
    assert winners <= {"village", "werewolves", "draw"} and {"village", "werewolves"} <= winners


def test_side_rule_only_counts_groups_the_table_seats():
    game = deal({"werewolf": 1, "villager": 4}, win_rule="side")  # no gods: they are not "all dead"
    assert game.check_winner() is None
    game.get(next(p.pid for p in game.players if p.role == "villager")).alive = False
    assert game.check_winner() is None
    for p in game.with_role("villager"):
        p.alive = False
    assert game.check_winner() == "werewolves"
    game = deal({"werewolf": 1, "seer": 1, "witch": 1, "hunter": 1}, win_rule="side")  # no villagers
    assert game.check_winner() is None
    game.get(game.with_role("seer")[0].pid).alive = False
    assert game.check_winner() is None
