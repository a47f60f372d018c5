"""Fixtures: a local endpoint and a remote process connected to it."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import helpers  # noqa: E402
import tpx  # noqa: E402


def pytest_report_header(config):
    return [f"tpx {tpx.version()} from {tpx._lib.lib._name}; memory: {helpers.MEM}; python {sys.executable}"]


@pytest.fixture
def ep():
    with tpx.Endpoint(helpers.GPU if helpers.MEM == "cuda" else 0, port=None, listen_host="127.0.0.1",
                      name="parent") as e:
        yield e


@pytest.fixture
def remote():
    r = helpers.Remote()
    yield r
    r.close()


@pytest.fixture
def pair(ep, remote):
    """(endpoint, peer on it, remote process): we dialled the remote."""
    peer = ep.connect("127.0.0.1", remote.port)
    assert remote.call("accept") == "parent"
    yield ep, peer, remote
