"""The run report names each server's trace viewer (issue 29): the live login-link command and, for after the run,
`vibe-rl traces serve` of its experiment dir; a report saved before the field existed still loads."""

from __future__ import annotations

from vibe_rl.autopilot.report import RunReport


def test_the_report_links_the_trace_viewer():
    rep = RunReport("proj", "default", 1, outcome="success", global_step=1, new_updates={"server1": 1},
                    traces=["vibe-rl swarm ui --url http://127.0.0.1:10086 (a login link to "
                            "http://127.0.0.1:10086/control/ui, the game timelines); after the run: "
                            "vibe-rl traces serve proj/experiments/server1"])
    shown = rep.render()
    assert "  traces: vibe-rl swarm ui --url http://127.0.0.1:10086" in shown
    assert "vibe-rl traces serve proj/experiments/server1" in shown
    old = RunReport.from_dict({"project": "proj", "mode": "default", "target_step": 1})
    assert old.traces == [] and "traces:" not in old.render()
