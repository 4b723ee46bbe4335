"""Fixtures for the fake API server's own tests: the official client on ``apiserver``."""

import pytest


@pytest.fixture
def official_client(apiserver):
    """The official client's ApiClient, configured from the server's kubeconfig (as
    ``kubectl`` users would), not the production ``build_api_client``."""
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture
def core_v1(official_client):
    """The official client's CoreV1Api on ``official_client``."""
    from kubernetes import client

    return client.CoreV1Api(official_client)


@pytest.fixture
def fake(apiserver):
    """The fake behind ``apiserver`` (tests using it are skipped under envtest)."""
    from tests.fakeapi import skip_unless_fake

    return skip_unless_fake(apiserver, "drives the fake's own controls, which a real kube-apiserver does not have")
