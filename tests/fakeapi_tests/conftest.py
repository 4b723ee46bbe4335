"""Load the fake API server fixtures for these tests.

``pytest_plugins`` is only allowed in the top-level conftest (tests/conftest.py, which
may already load ``tests.fakeapi.fixtures``); here the plugin is registered only if it
is not loaded yet, so this directory also runs on its own.
"""

import pytest

PLUGIN = "tests.fakeapi.fixtures"


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin(PLUGIN):
        config.pluginmanager.import_plugin(PLUGIN)


@pytest.fixture
def core_v1(apiserver):
    """The official client's CoreV1Api, configured from the server's kubeconfig."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        yield client.CoreV1Api(api_client)
    finally:
        api_client.close()


@pytest.fixture
def fake(apiserver):
    """The fake behind ``apiserver`` (tests using it are skipped under envtest)."""
    from tests.fakeapi import skip_unless_fake

    return skip_unless_fake(apiserver)
