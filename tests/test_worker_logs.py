"""No secret in what worker processes log or print: Beam's (`--direct_num_workers 2`, multi-processing)
and a Dask cluster's (`--runner DaskRunner`): a run whose workers log the API key at INFO and WARNING and
print it, seen from the terminal."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import apache_beam as beam
import pytest

from ground.log_scrubbing import ScrubbedLines

REPO = Path(__file__).resolve().parent.parent
# one variable whose name says it holds a secret, one that only an LLM role's `api_key_env` makes one
NAMED, NAMED_VALUE = "HOPSMITH_TEST_SERVICE_TOKEN", "tok-NAMED-sentinel-4411"
ROLE_ENV, ROLE_VALUE = "HOPSMITH_WORKER_ACCESS", "sk-role-SENTINEL-90817263"


class LogTheSecrets(beam.DoFn):
    """What a careless log line in a stage would do, in each worker."""

    def process(self, element):
        secrets = f"{os.environ[NAMED]} {os.environ[ROLE_ENV]}"
        logging.getLogger("hopsmith.worker_test").info("element %s INFO with %s", element, secrets)
        logging.getLogger("hopsmith.worker_test").warning("element %s WARNING with %s", element, secrets)
        print(f"element {element} printed with {secrets}")
        yield element


def run_pipeline(verbose: bool) -> None:
    """Logging as `hopsmith` sets it up, the role registered as a stage's config does, then 2 workers."""
    from cli.main import configure_logging
    from runtime.beam import pipeline_options
    from schemas.config import BeamOptions, LLMRole

    configure_logging(verbose)
    LLMRole(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=ROLE_ENV)
    with beam.Pipeline(options=pipeline_options(BeamOptions(direct_num_workers=2))) as pipeline:
        pipeline | beam.Create(range(4)) | beam.ParDo(LogTheSecrets())


def run_on_dask() -> None:
    """The same on a 2-process Dask cluster started before the role is registered (as a cluster a user
    started apart: its workers' environment does not name the role's variable)."""
    import distributed

    from cli.main import configure_logging
    from runtime.beam import pipeline_options
    from schemas.config import LLMRole

    configure_logging(False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        LLMRole(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=ROLE_ENV)
        options = pipeline_options(None, ["--runner", "DaskRunner", "--dask_client_address", cluster.scheduler_address])
        with beam.Pipeline(options=options) as pipeline:
            pipeline | beam.Create(range(4)) | beam.ParDo(LogTheSecrets())


def _run(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), NAMED: NAMED_VALUE, ROLE_ENV: ROLE_VALUE}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert NAMED_VALUE not in output and ROLE_VALUE not in output, output
    return output.splitlines()


def _lines(lines: list[str], element: int, kind: str) -> list[str]:
    return [line for line in lines if f"element {element} {kind} with *** ***" in line]


@pytest.mark.parametrize("verbose", [True, False])
def test_worker_logs_and_prints_are_scrubbed_and_shown_once_at_the_chosen_level(verbose):
    lines = _run(f"from tests.test_worker_logs import run_pipeline; run_pipeline({verbose})")
    for element in range(4):
        # once: no second, unscrubbed worker handler; INFO only at the level the user chose
        assert len(_lines(lines, element, "WARNING")) == len(_lines(lines, element, "printed")) == 1, lines
        assert len(_lines(lines, element, "INFO")) == (1 if verbose else 0), lines


@pytest.mark.scale
def test_dask_worker_logs_and_prints_are_scrubbed():
    pytest.importorskip("distributed")
    lines = _run("from tests.test_worker_logs import run_on_dask; run_on_dask()")
    for element in range(4):
        assert len(_lines(lines, element, "WARNING")) == len(_lines(lines, element, "printed")) == 1, lines


def test_a_secret_written_in_pieces_is_masked_whole(monkeypatch):
    monkeypatch.setenv(NAMED, NAMED_VALUE)
    target = io.StringIO()
    stream = ScrubbedLines(target)
    stream.write("key tok-NAMED-")
    stream.write("sentinel-4411 end\npartial tok-NAMED-sentinel-4411")
    assert target.getvalue() == "key *** end\n"
    stream.flush()
    assert target.getvalue() == "key *** end\npartial ***"


def test_a_log_call_whose_arguments_do_not_fit_is_shown_scrubbed_not_raised(monkeypatch):
    from ground.log_scrubbing import ScrubLogs

    monkeypatch.setenv(NAMED, NAMED_VALUE)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%d items for %s", (NAMED_VALUE,), None)
    assert ScrubLogs().filter(record)
    assert NAMED_VALUE not in record.getMessage() and "%d items for %s" in record.getMessage()
