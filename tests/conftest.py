"""Root fixtures: the fake (or envtest) API server is available to every test package."""

pytest_plugins = ["tests.fakeapi.fixtures"]
