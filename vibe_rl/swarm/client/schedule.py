"""The stream of episodes a rollout loop plays: GRPO groups of training tasks, with eval rounds between.

    for task, is_eval in schedule(tasks, grpo_n, held_out=tasks[-4:], eval_every=5, step=lambda: swarm.status().global_step):
        ...   # usually handed to run_in_flight

Training tasks are played `grpo_n` times each (one GRPO group), epoch after epoch, forever. With
`held_out` tasks and `eval_every` K > 0, each held-out task is played once as an eval episode at the
start and again every time `step()` (the server's global step) has moved K updates past the last eval
round. Eval episodes are never trained on, so held-out tasks stay unseen by training.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence

from vibe_rl.errors import ConfigError
from vibe_rl.schema import Task


def split_held_out(tasks: Sequence[Task], n: int) -> tuple[list[Task], list[Task]]:
    """(training tasks, the last `n` tasks held out for eval); at least one task stays for training."""
    if n < 0 or n >= len(tasks):
        raise ConfigError(f"Cannot hold out {n} of {len(tasks)} tasks for eval: keep at least one for training "
                          f"(use --eval N with N < {len(tasks)}).")
    return list(tasks[:len(tasks) - n]), list(tasks[len(tasks) - n:])


def schedule(tasks: Sequence[Task], grpo_n: int, held_out: Sequence[Task] = (), eval_every: int = 0,
             step: Callable[[], int] | None = None) -> Iterator[tuple[Task, bool]]:
    """(task, is_eval) pairs, forever: see the module doc."""
    if not tasks:
        raise ConfigError("No training tasks: the dataset is empty.")
    evals = bool(held_out) and eval_every > 0
    if evals and step is None:
        raise ConfigError("eval_every needs step=, e.g. lambda: swarm.status().global_step")
    last_eval = None
    for task in itertools.cycle(tasks):
        if evals:
            now = step()
            if last_eval is None or now >= last_eval + eval_every:
                last_eval = now
                yield from ((t, True) for t in held_out)
        yield from ((task, False) for _ in range(grpo_n))
