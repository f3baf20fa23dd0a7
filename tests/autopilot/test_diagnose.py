"""Diagnosis on recorded pane text and status snapshots (pure, no processes)."""

from vibe_rl.autopilot.diagnose import Diagnosis, diagnose_status, diagnose_text, exit_code, parse_tracebacks

NAME_ERROR = """\
[client] starting 4 tasks x 2 episodes
Traceback (most recent call last):
  File "/tmp/proj/agent_roll.py", line 41, in <module>
    main()
  File "/tmp/proj/agent_roll.py", line 35, in main
    run_in_flight(play, tasks(), max_in_flight=4)
  File "/opt/venv/lib/python3.11/site-packages/vibe_rl/swarm/flight.py", line 60, in run_in_flight
    fn(item)
  File "/tmp/proj/agent_run.py", line 17, in run_episode
    players = make_playrs(task)
              ^^^^^^^^^^^
NameError: name 'make_playrs' is not defined. Did you mean: 'make_players'?
__VIBE_RL_EXIT__ 1
"""


def test_traceback_names_the_project_file_and_line():
    d = diagnose_text(NAME_ERROR, "spy-swarm-client", project_dir="/tmp/proj")
    assert d is not None and d.kind == "traceback"
    assert d.file == "/tmp/proj/agent_run.py" and d.line == 17
    assert d.summary.startswith("NameError: name 'make_playrs' is not defined")
    assert "make_playrs" in d.suggestion and "agent_run.py:17" in d.suggestion
    assert "spy-swarm-client" in d.render() and "agent_run.py:17" in d.render()


def test_traceback_without_project_skips_site_packages():
    text = NAME_ERROR.replace("/tmp/proj/agent_run.py", "/opt/venv/lib/python3.11/site-packages/x.py")
    d = diagnose_text(text, "c")
    assert d.file == "/tmp/proj/agent_roll.py" and d.line == 35


def test_chained_tracebacks_pick_the_last():
    text = (
        'Traceback (most recent call last):\n  File "/p/a.py", line 3, in f\n    x[1]\nKeyError: 1\n\n'
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "/p/a.py", line 5, in f\n    raise ValueError("bad")\n'
        "ValueError: bad\n"
    )
    tbs = parse_tracebacks(text)
    assert [t.exc_type for t in tbs] == ["KeyError", "ValueError"]
    d = diagnose_text(text, "s", "/p")
    assert d.summary == "ValueError: bad" and d.line == 5


def test_oom_nan_and_port():
    oom = "step 0\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert diagnose_text(oom).kind == "oom"
    nan = "[train] step=3 loss=nan reward_mean=0.5\n"
    assert diagnose_text(nan).kind == "nan_loss"
    port = "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 10086): address already in use\n"
    d = diagnose_text(port, "spy-swarm-server")
    assert d.kind == "port_in_use" and "Errno 98" in d.excerpt


def test_healthy_text_is_not_a_failure():
    text = "INFO: Uvicorn running on http://127.0.0.1:10086\n[pool] 3/8 episodes, loss computed\nreward=0.5\n"
    assert diagnose_text(text) is None


def test_empty_task_id_validation_error_is_its_own_kind():
    text = (
        'Traceback (most recent call last):\n  File "/p/agent_roll.py", line 20, in <module>\n'
        '    task = Task(task_id="", main_query=q)\n'
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for Task\ntask_id\n"
        "  Value error, task_id is empty. GRPO compares episodes of the same task [type=value_error]\n"
    )
    d = diagnose_text(text, "spy-swarm-client", "/p")
    assert d.kind == "empty_task_id" and d.file == "/p/agent_roll.py" and d.line == 20
    assert "task_id=str(seed)" in d.suggestion


def test_exit_marker():
    assert exit_code(NAME_ERROR) == 1
    assert exit_code("running") is None


def _status(tasks, episodes, n_tasks, grpo_n=2):
    return {"state": "ROLLING", "global_step": 0,
            "pool": {"completed_episodes": episodes, "completed_tasks": n_tasks, "grpo_n": grpo_n,
                     "target_tasks": 2},
            "tasks": tasks, "last_update": None, "errors": []}


def test_pool_with_empty_task_id():
    d = diagnose_status(_status([{"task_id": "", "episodes": 140, "reward_mean": 0.78}], 140, 1))
    assert d.kind == "empty_task_id" and "140 episodes" in d.summary


def test_pool_grows_in_episodes_not_tasks():
    d = diagnose_status(_status([{"task_id": "seed-1", "episodes": 12}], 12, 1))
    assert d.kind == "repeated_task_id"
    # a healthy pool: many tasks, each with grpo_n episodes
    ok = _status([{"task_id": str(i), "episodes": 2} for i in range(6)], 12, 6)
    assert diagnose_status(ok) is None


def test_nan_loss_in_status():
    s = _status([], 0, 0)
    s["last_update"] = {"step": 1, "loss": float("nan")}
    assert diagnose_status(s).kind == "nan_loss"


def test_signature_ignores_message_details_but_not_location():
    a = Diagnosis("traceback", "NameError: name 'x' is not defined", "c", "/p/a.py", 3)
    b = Diagnosis("traceback", "NameError: name 'x' is not defined (again)", "c", "/p/a.py", 3)
    c = Diagnosis("traceback", "NameError: name 'x' is not defined", "c", "/p/a.py", 4)
    assert a.signature == b.signature != c.signature


def test_episode_failure_logged_without_traceback_is_located(tmp_path):
    (tmp_path / "agent_run.py").write_text("def describe():\n    pass\n\n\ndef play():\n    return describ()\n")
    text = ("item failed (NameError: name 'describ' is not defined); retry 1/2\n"
            "item failed after 3 attempts: NameError: name 'describ' is not defined\n")
    d = diagnose_text(text, "spy-swarm-client", tmp_path)
    assert d.kind == "traceback" and d.file == str((tmp_path / "agent_run.py").resolve()) and d.line == 6
    assert "describ" in d.suggestion


def test_transient_episode_failures_need_repeats():
    one = "item failed after 3 attempts: APIConnectionError: Connection error.\n"
    assert diagnose_text(one) is None
    assert diagnose_text(one * 3).kind == "episode_failures"
    assert diagnose_text("item failed (NameError: x); retry 1/2\n") is None  # still retrying


def test_skipped_non_finite_step_is_nan_loss():
    s = _status([], 0, 0)
    s["last_update"] = {"step": 1.0, "loss": 0.0, "nan_skipped": 1.0, "nan_skipped_total": 1.0}
    d = diagnose_status(s)
    assert d.kind == "nan_loss" and "skipped: 1" in d.summary
    s["last_update"] = {"step": 1.0, "loss": 0.5, "nan_skipped": 0.0, "nan_skipped_total": 0.0}
    assert diagnose_status(s) is None
