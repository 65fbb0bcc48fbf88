"""free_port: the loopback ports the launchers (and the tests' servers) listen on."""

from __future__ import annotations

import socket
from pathlib import Path

from replication.kafka import processes
from replication.kafka.processes import free_port


def test_a_free_port_is_bindable_and_below_the_ephemeral_range_that_clients_are_given():
    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert len(ports) > 1  # chosen at random, not one port for everyone
    for port in ports:
        assert 16384 <= port < first_ephemeral
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_someone_listens_on_is_never_given(monkeypatch):
    taken_port = free_port()
    other = next(port for port in iter(free_port, None) if port != taken_port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", taken_port))
        taken.listen()
        offered = iter([taken_port, taken_port, other])
        monkeypatch.setattr(processes.random, "randrange", lambda low, high: next(offered))
        assert free_port() == other
