from __future__ import annotations

import math

import pytest

from vibe_rl.errors import ConfigError
from vibe_rl.rl.advantages import assign_advantages, grpo_advantages
from vibe_rl.rl.samples import Sample


def test_group_normalised_per_task():
    adv = grpo_advantages(["a", "a", "b", "b", "a", "b"], [1.0, 0.0, 5.0, 5.0, 0.5, 5.0])
    assert adv.num_groups == 2 and adv.num_all_equal_groups == 1
    a = [adv.values[i] for i in (0, 1, 4)]
    assert abs(sum(a)) < 1e-9
    assert math.isclose(sum(x * x for x in a) / 3, 1.0, rel_tol=1e-4)  # unit (population) variance
    assert a[0] > a[2] > a[1]
    assert [adv.values[i] for i in (2, 3, 5)] == [0.0, 0.0, 0.0]  # all equal: exactly zero
    assert adv.metrics() == {"groups": 2.0, "all_equal_groups": 1.0}


def test_singleton_groups_and_unscaled_variant():
    adv = grpo_advantages(["x"], [3.0])
    assert adv.values == [0.0] and adv.num_all_equal_groups == 1
    raw = grpo_advantages(["t", "t"], [1.0, 3.0], scale_by_std=False)
    assert raw.values == [-1.0, 1.0]


def test_assign_to_samples_by_episode():
    samples = [Sample([1, 2], [0, 1], [0.0, -1.0], task_id="t", episode_id=e) for e in ("e1", "e1", "e2")]
    adv = assign_advantages(samples, {"e1": 1.0, "e2": 0.0})
    assert samples[0].advantage == samples[1].advantage > 0 > samples[2].advantage
    assert adv.num_groups == 1
    with pytest.raises(ConfigError, match="no reward"):
        assign_advantages(samples, {"e1": 1.0})


def test_bad_inputs_raise():
    with pytest.raises(ConfigError, match="non-finite"):
        grpo_advantages(["a", "a"], [1.0, float("nan")])
    with pytest.raises(ConfigError, match="one of each"):
        grpo_advantages(["a"], [1.0, 2.0])
