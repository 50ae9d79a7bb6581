"""`python -m bench` keeps each benchmark's figures in bench/results/<name>.json with the commit, the UTC
date and the machine: the file the docs cite."""

from __future__ import annotations

import datetime as dt
import json
import platform
import re
import subprocess

from bench.record import RESULTS_DIR, commit, machine, write_result

FACTS = {"cpu": "Test CPU", "cores": 2, "memory_gib": 7.8, "python": "3.11.0", "os": "Linux"}


def test_a_result_is_written_with_commit_date_and_machine(tmp_path):
    when = dt.datetime(2027, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    path = write_result("walks", {"csr_walks_per_s": 12345.678901234, "edges": 100000.0}, quick=True,
                        directory=tmp_path, now=when)
    assert path == tmp_path / "walks.json"
    [entry] = json.loads(path.read_text())
    assert set(entry) == {"commit", "date", "machine", "load_1min", "quick", "settings", "results"}
    assert entry["date"] == "2027-01-02T01:04:05Z"  # UTC
    assert entry["quick"] is True and entry["settings"] == {} and entry["load_1min"] >= 0
    assert entry["results"] == {"csr_walks_per_s": 12345.7, "edges": 100000.0}  # six significant digits
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=RESULTS_DIR.parent, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert re.fullmatch(re.escape(head) + r"(\+dirty)?", entry["commit"])
    assert entry["commit"] == commit()
    facts = entry["machine"]
    assert set(facts) == {"cpu", "cores", "memory_gib", "python", "os"}
    assert facts["python"] == platform.python_version()
    assert facts["cores"] >= 1 and facts["memory_gib"] > 0 and facts["cpu"]
    assert facts == machine()


def test_a_rerun_replaces_only_its_own_entry(tmp_path):
    def write(value: float, **kwargs) -> list[dict]:
        arguments = {"quick": False, "revision": "abc1234", "facts": FACTS} | kwargs
        return json.loads(write_result("merge", {"cpu_s": value}, directory=tmp_path, **arguments).read_text())

    write(1.0)
    write(2.0, quick=True)
    write(3.0, revision="def5678+dirty")
    write(4.0, facts=FACTS | {"cores": 16})
    write(5.0, settings={"HOPSMITH_SCALE_SIZES": "100000,400000"})
    entries = write(6.0)  # the same commit, machine, mode and settings as the first
    assert [entry["results"]["cpu_s"] for entry in entries] == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert entries[-1]["commit"] == "abc1234" and entries[-1]["machine"] == FACTS
    assert (tmp_path / "merge.json").read_text().endswith("}\n]\n")  # one field a line: diffs stay readable
