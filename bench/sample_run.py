"""`make dataset` as a user runs it: `hopsmith dataset` on the shipped sample in a fresh process, from an
empty output folder (the venv exists), its wall and CPU seconds and each stage's time as its manifest
records it (started to finished). Target: the whole run under 45 s wall on 2 cores (issue 28). Quick mode
is the same run: the sample is the input either way.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import children_cpu_s
from pipeline.dataset import stage_dirs

REPOSITORY = Path(__file__).resolve().parents[1]
TARGET_WALL_S = 45.0


def stage_seconds(out: Path) -> dict[str, float]:
    """Each stage's time, finished minus started, from the manifests the run wrote."""
    seconds = {}
    for stage, folder in stage_dirs(out).items():
        manifest = folder / "manifest.json"
        if manifest.is_file():
            fields = json.loads(manifest.read_text())
            started, finished = (dt.datetime.fromisoformat(fields[k]) for k in ("started_at", "finished_at"))
            seconds[stage] = round((finished - started).total_seconds(), 2)
    return seconds


def run(quick: bool = False) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="hopsmith-bench-sample-") as folder:
        out = Path(folder) / "out"
        cpu, wall = children_cpu_s(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "cli.main", "dataset", "--out", str(out)], cwd=REPOSITORY, check=True,
                       capture_output=True, text=True)
        wall, cpu = time.perf_counter() - wall, children_cpu_s() - cpu
        stages = stage_seconds(out)
    results = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "stages_s": round(sum(stages.values()), 2),
               "outside_stages_s": round(wall - sum(stages.values()), 2), "target_wall_s": TARGET_WALL_S,
               **{f"stage_{name}_s": value for name, value in stages.items()}}
    print(f"   make dataset on the sample: {results['wall_s']} s wall ({results['cpu_s']} s CPU; target < "
          f"{TARGET_WALL_S:.0f} s wall), {results['outside_stages_s']} s outside the stages (imports, start-up)")
    print("   " + ", ".join(f"{name} {value} s" for name, value in stages.items()))
    return results
