"""Fixtures the evaluation tests share: the worked example's plans (two instances with
scripted answers) and retries fast enough for a test (a module opts in with
``pytestmark = pytest.mark.usefixtures("fast_retries")``)."""
import pytest

from cupid import config
from cupid_responder import two_instance_plans


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setattr(config, "RETRY_BASE_DELAY", 0.01)
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 0.05)


@pytest.fixture
def plans():
    return two_instance_plans()
