"""Head addresses: HOST:PORT over TCP, unix:PATH for a local cluster's private socket."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

import dista_runtime as dista
from dista_runtime._net.address import format_head, parse_head, unix_path


def test_parse_and_format_round_trip() -> None:
    assert parse_head("10.0.0.2:7420") == ("10.0.0.2", 7420)
    assert parse_head(":7420") == ("127.0.0.1", 7420)
    assert parse_head("unix:/tmp/d/head") == ("unix:/tmp/d/head", 0)
    assert unix_path("unix:/tmp/d/head") == "/tmp/d/head"
    assert unix_path("127.0.0.1") is None
    for text in ("10.0.0.2:7420", "unix:/tmp/d/head"):
        assert format_head(*parse_head(text)) == text


@pytest.mark.parametrize("bad", ["localhost", "host:port", "unix:", "", "h:0", "h:99999"])
def test_bad_addresses_say_what_is_expected(bad: str) -> None:
    with pytest.raises(ValueError, match=r"HOST:PORT|unix:PATH|names a socket"):
        parse_head(bad)


def test_a_bad_address_to_init_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        dista.init("nowhere")
    with pytest.raises(dista.DistaError, match="a port from 1 to 65535"):
        dista.init("127.0.0.1:99999")


def test_the_socket_directory_goes_with_the_cluster() -> None:
    # (Before the module's shared cluster starts: one init at a time.)
    with dista.init(workers=1) as c:
        path = unix_path(c.address)
        assert path is not None and os.path.exists(path)
    assert not os.path.exists(os.path.dirname(path))


def test_a_local_cluster_listens_on_a_private_unix_socket(cluster: dista.Cluster) -> None:
    address = cluster.address
    assert address.startswith("unix:")
    path = unix_path(address)
    assert path is not None and stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    # An observer reaches it by that address too.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-m", "dista_runtime.cli", "status", "--head", address],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "worker" in out.stdout
