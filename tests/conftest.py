"""Shared fixtures. The offline environment is set before any tool is imported."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("JUDGELAB_ROOT", str(ROOT))

from judgelab.env import configure_offline_env  # noqa: E402

configure_offline_env()

pytest_plugins = ["tests.support.browser"]  # the `chromium` fixture

from judgelab.config import EmbeddedModel, ServerSettings, load_settings  # noqa: E402
from judgelab.models.endpoint import Endpoint  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Prefect API server for the session, as PREFECT_API_URL for the tests and every
    command they start. A stage command finding none set starts a temporary server of its own
    (judgelab_cli.deploy.temporary_prefect_server), about 12 s a stage on a 2-core AVX2 EPYC,
    and the suite runs a stage command many times over. The tests of that path start their
    commands without Prefect's variables (the stage-kill test in test_crash_resume.py, the
    probes command in test_probes_biased.py). A server the caller already set is used as it is."""
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    from judgelab_cli.deploy import temporary_prefect_server

    # A home of its own for the session's server and every Prefect process after it: the unit
    # tests run on several workers, each with a server, and two servers creating one database
    # at once fail their migrations (a fresh clone has none yet).
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-home"))
    with temporary_prefect_server() as url:
        yield url


@pytest.fixture(scope="module")
def embedded_server() -> Iterator[object]:
    """One llama.cpp server for the module, serving every zoo model of params.yaml.

    Module scope: a server holds the machine-wide model lock, so tests in other modules that
    start their own (the pipeline flows do) must not find one still running.
    """
    from judgelab.models.server import EmbeddedServer

    settings = load_settings(ROOT / "params.yaml")
    zoo = {n: s for n, s in settings.models.items() if isinstance(s, EmbeddedModel)}
    with EmbeddedServer(zoo, ServerSettings(n_threads=2)) as server:
        yield server


@pytest.fixture(scope="module")
def embedded_endpoint(embedded_server: object) -> Callable[[str], Endpoint]:
    """embedded_endpoint("smollm2-135m") -> an Endpoint on the module's real server."""
    return embedded_server.endpoint  # type: ignore[attr-defined,no-any-return]
