"""The run report's reading of the servers' latest updates."""

from vibe_rl.autopilot.report import flat_update_notes, reward_so_far


def _status(groups: int, all_equal: int, reward: float) -> dict:
    return {"pool": {"completed_episodes": 0},
            "last_update": {"step": 1, "groups": groups, "all_equal_groups": all_equal, "reward_mean": reward,
                            "episodes": 4}}


def test_an_update_with_only_equal_reward_groups_is_called_out():
    notes = flat_update_notes({"server1": _status(2, 2, 0.0), "server2": _status(2, 1, 0.5)})
    assert len(notes) == 1 and notes[0].startswith("server1:") and "gradient were zero" in notes[0]


def test_no_note_without_an_update():
    assert flat_update_notes({"server1": {"pool": {}, "last_update": None}}) == []


def test_reward_so_far_reads_the_latest_updates():
    rewards, episodes = reward_so_far({"a": _status(2, 0, 1.0), "b": _status(2, 0, 0.0),
                                       "c": {"pool": {"completed_episodes": 3}, "last_update": None,
                                             "tasks": [{"episodes": 2, "reward_mean": 1.0}, {"episodes": 1}]}})
    assert rewards == {"a": 1.0, "b": 0.0, "c": 1.0} and episodes == 11


def test_two_servers_rewards_are_shown_apart_never_averaged():
    from vibe_rl.autopilot.report import RunReport

    report = RunReport("p", "agent_roll_adv", 1, outcome="success", global_step=1, reward_mean=0.5,
                       rewards={"server1": 1.0, "server2": 0.0}, episodes=32)
    assert "reward so far: server1 1.000, server2 0.000 (latest update; 32 episodes completed)" in report.render()
    one = RunReport("p", "agent_roll", 1, outcome="success", global_step=1, reward_mean=0.25,
                    rewards={"server1": 0.25}, episodes=16)
    assert "reward so far: 0.250 (latest update" in one.render()


def test_the_headline_says_whether_this_runs_updates_moved_any_weight_and_what_was_resumed():
    from vibe_rl.autopilot.report import RunReport

    flat = RunReport("p", "agent_roll", 1, outcome="success", global_step=21, start_steps={"server1": 20},
                     new_updates={"server1": 1}, signal_steps={"server1": None})
    text = flat.render()
    assert text.startswith("[vibe-rl] weight updates made, but every one had zero gradient: global step 21")
    assert "updates made by this run: server1 1" in text and "training has started" not in text
    assert "resumed from a checkpoint (server1 at step 20); those earlier steps are not counted" in text
    moved = RunReport("p", "agent_roll", 1, outcome="success", global_step=2, start_steps={"server1": 0},
                      new_updates={"server1": 2}, signal_steps={"server1": 2})
    text = moved.render()
    assert text.startswith("[vibe-rl] training has started") and "first update with a non-zero gradient: step 2" in text
    assert "resumed" not in text
    again = RunReport.from_dict(__import__("dataclasses").asdict(moved))
    assert again.render() == text
