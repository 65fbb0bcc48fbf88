"""A second host on this machine for network faults: a network namespace joined to ours by a veth pair
(iproute2; the suite runs as root). `partition()` takes the link down, so packets between the two hosts
go nowhere and every connection across fails as in a real network partition; `heal()` brings it back."""

from __future__ import annotations

import os
import subprocess


def _ip(*arguments: str) -> None:
    subprocess.run(["ip", *arguments], check=True, capture_output=True, text=True)


class IsolatedHost:
    """`with IsolatedHost("src") as host:` a namespace at `host.address`, reachable from here."""

    def __init__(self, label: str) -> None:
        subnet = os.getpid() % 200 + 20
        self.name = f"mp-{label}-{os.getpid()}"[:15]
        self.outside, self.inside = f"mpo{os.getpid()}"[:15], f"mpi{os.getpid()}"[:15]
        self.local_address, self.address = f"10.213.{subnet}.1", f"10.213.{subnet}.2"

    def __enter__(self) -> IsolatedHost:
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.outside, "type", "veth", "peer", "name", self.inside)
            _ip("link", "set", self.inside, "netns", self.name)
            _ip("addr", "add", f"{self.local_address}/30", "dev", self.outside)
            _ip("link", "set", self.outside, "up")
            _ip("netns", "exec", self.name, "ip", "addr", "add", f"{self.address}/30", "dev", self.inside)
            _ip("netns", "exec", self.name, "ip", "link", "set", self.inside, "up")
            _ip("netns", "exec", self.name, "ip", "link", "set", "lo", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def command(self, *arguments: str) -> list[str]:
        """`arguments` as a command run on the isolated host."""
        return ["ip", "netns", "exec", self.name, *arguments]

    def partition(self) -> None:
        _ip("link", "set", self.outside, "down")

    def heal(self) -> None:
        _ip("link", "set", self.outside, "up")

    def __exit__(self, *exc_info: object) -> None:
        subprocess.run(["ip", "link", "del", self.outside], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
