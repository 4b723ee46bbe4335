"""Schemathesis against GET /openapi.json: what the service documents is what it does.

In-process (WSGI) for every operation, positive and negative examples; then a smaller
run against the live gunicorn server. Checks: no 5xx, only documented status codes and
content types, replies that match the documented schemas, and (negative examples)
schema-invalid bodies refused with a 4xx.

Not checked: `positive_data_acceptance`. The document cannot say "exactly one of Nodes
and NodeNames" or "Pod is a valid v1.Pod", so schema-valid bodies may rightly get a 400.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from extender.settings import Settings
from extender.webhook import create_app
from extender.webhook.runtime import build_runtime
from tests.reliability.figures import FIGURES
from tests.reliability.servers import LiveServer

EXAMPLES_PER_OPERATION = 50  # per generation mode, in-process
LIVE_EXAMPLES_PER_OPERATION = 15
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
REPORTED = 5


def _run(schema: schemathesis.BaseSchema, examples: int, label: str) -> list[str]:
    """Run every operation of `schema`; returns the failures as text."""
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.label for op in operations} >= {"POST /filter", "POST /prioritize", "POST /bind", "POST /preempt"}
    for operation in operations:
        # GETs without parameters have no negative space: hypothesis would find nothing to generate.
        modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if operation.method.upper() == "POST" else [])
        for mode in modes:
            failures += _run_operation(operation, mode, examples, label)
    return failures


def _run_operation(operation: schemathesis.APIOperation, mode: GenerationMode, examples: int,
                   label: str) -> list[str]:
    checks = CHECKS + ([negative_data_rejection] if mode == GenerationMode.NEGATIVE else [])
    failures: list[str] = []

    @hsettings(max_examples=examples, deadline=None, derandomize=True, database=None,
               phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(operation.as_strategy(generation_mode=mode))
    def run(case: schemathesis.Case) -> None:
        response = case.call()
        stats = FIGURES.schemathesis
        stats.cases += 1
        stats.by_operation[f"{label} {operation.label} {mode.value}"] += 1
        if response.status_code >= 500:
            stats.server_errors += 1
        try:
            case.validate_response(response, checks=checks)
        except Exception as exc:  # FailureGroup: one or more checks failed
            stats.failures += 1
            failures.append(f"{label} {operation.label} ({mode.value}): {str(exc)[:800]}")

    run()
    return failures


@pytest.mark.slow
def test_schemathesis_in_process(app: Flask) -> None:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures = _run(schema, EXAMPLES_PER_OPERATION, "wsgi")
    assert not failures, f"{len(failures)} failure(s):\n" + "\n\n".join(failures[:REPORTED])


@pytest.mark.slow
def test_schemathesis_live(gunicorn_server: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(f"{gunicorn_server.url}/openapi.json")
    failures = _run(schema, LIVE_EXAMPLES_PER_OPERATION, "gunicorn")
    assert not failures, f"{len(failures)} failure(s):\n" + "\n\n".join(failures[:REPORTED])


def test_not_ready_replies_are_documented(settings: Settings) -> None:
    """Before the first sync /readyz answers 503, and NodeNames calls get a 200 with an Error: both documented."""
    unsynced = build_runtime(replace(settings))  # never started: the state has not listed anything
    app = create_app(settings, runtime=unsynced, start=False)
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    readyz = schema["/readyz"]["GET"]
    case = readyz.Case()
    response = case.call()
    assert response.status_code == 503
    case.validate_response(response, checks=[c for c in CHECKS if c is not not_a_server_error])
