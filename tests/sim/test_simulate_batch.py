"""A Job and a CronJob through ``ksched simulate`` on the virtual clock (examples/batch/jobs.yaml):
the Job's three pods run two at a time and it completes; the CronJob creates a Job every five
minutes, each completes; the JSON report and the table show them."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from ksched.cli.main import main

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "batch" / "jobs.yaml"


def simulate(*extra: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["simulate", str(SCENARIO), "--quiet", "--max-time", "660", *extra])
    return rc, out.getvalue()


def test_a_job_and_a_cronjob_complete_on_the_virtual_clock() -> None:
    rc, out = simulate("--format", "json")
    assert rc == 0
    report: dict[str, Any] = json.loads(out)
    jobs = {j["name"]: j for j in report["jobs"]}
    crunch = jobs.pop("crunch")
    # Two pods 0-20 s; the sync a second later starts the third (21-41 s); complete at 42 s.
    assert (crunch["succeeded"], crunch["failed"], crunch["active"]) == (3, 0, 0)
    assert (crunch["condition"], crunch["reason"]) == ("Complete", "CompletionsReached")
    assert (crunch["startTime"], crunch["completionTime"]) == ("2025-01-01T00:00:00Z", "2025-01-01T00:00:42Z")
    # The CronJob's Jobs: 00:05 and 00:10, named by their minute, each complete.
    assert sorted(jobs) == ["report-28928165", "report-28928170"]
    for j in jobs.values():
        assert (j["succeeded"], j["condition"]) == (1, "Complete")
    assert report["cronjobs"] == [{"namespace": "default", "name": "report", "schedule": "*/5 * * * *",
                                   "active": [], "lastScheduleTime": "2025-01-01T00:10:00Z",
                                   "lastSuccessfulTime": "2025-01-01T00:10:31Z"}]
    pods = [p for p in report["pods"] if p["name"].startswith("crunch-")]
    assert len(pods) == 3 and all(p["phase"] == "Succeeded" and p["node"] == "n1" for p in pods)
    # The run ends with the last change (the 00:10 Job done and its CronJob updated at 00:10:31.1; a
    # timer that fires a second later and finds nothing to do does not count), before the next time.
    assert report["summary"]["pods"] == 5 and report["summary"]["seconds"] == 631.1


def test_the_table_shows_the_jobs() -> None:
    rc, out = simulate()
    assert rc == 0
    assert "Jobs" in out and "default/crunch" in out and "(CompletionsReached)" in out
