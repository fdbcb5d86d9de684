"""Pod sandboxes of the tfk8s node agent: network namespaces, hosts files, mount points.

Why a network namespace per pod: TF_CONFIG names peers as ``<role>-<i>.<job>.<ns>.svc:2222``
and every replica listens on the same port 2222, so each pod needs its own address and a
resolver that knows its peers. One Linux bridge with a private /24 (default 10.213.0.0/24,
gateway .1 on the bridge) and one veth pair per pod give each pod its address; no default
route is set, so a pod can reach only its peers on the bridge. ``ip netns exec`` bind-mounts
``/etc/netns/<netns>/hosts`` over ``/etc/hosts`` in a private mount namespace; the hosts file
is rewritten in place (same inode) so a running pod sees peers that appear later.

Everything created here carries the ``tfk8s-`` (netns), ``tfkv`` (veth) prefixes or the bridge
name, so :func:`cleanup_all` can remove leftovers without any record of them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

log = logging.getLogger("nodeagent.sandbox")

NETNS_PREFIX = "tfk8s-"
VETH_PREFIX = "tfkv"
PEER_PREFIX = "tfkp"
NETNS_ETC = Path("/etc/netns")


class SandboxError(Exception):
    """A pod's sandbox could not be created (reported as the container's waiting message)."""


def run(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    res = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise SandboxError(f"{' '.join(args)} failed (exit {res.returncode}): {res.stderr.strip()}")
    return res


def netns_list() -> list[str]:
    out = run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    out = run("ip", "netns", "pids", netns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def kill_netns_processes(netns: str, timeout: float = 10) -> None:
    """SIGKILL every process inside ``netns`` and wait (bounded) until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = netns_pids(netns)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            log.warning("processes %s in %s survived SIGKILL for %.0fs", pids, netns, timeout)
            return
        time.sleep(0.1)


class Network:
    """The agent's bridge and address pool (one /24, .1 is the bridge)."""

    def __init__(self, subnet: str, bridge: str):
        self.net = ipaddress.ip_network(subnet)
        if self.net.prefixlen < 16 or self.net.prefixlen > 28:
            raise SandboxError(f"subnet {subnet}: use a private prefix between /16 and /28")
        self.bridge = bridge
        self.gateway = str(self.net.network_address + 1)
        self._used: set[str] = set()
        self._lock = threading.Lock()

    def ensure_bridge(self) -> None:
        # Never take over a network this machine already routes somewhere else.
        for line in run("ip", "-o", "-4", "route", "show").stdout.splitlines():
            words = line.split()
            if not words or words[0] == "default" or f"dev {self.bridge}" in line:
                continue
            try:
                other = ipaddress.ip_network(words[0], strict=False)
            except ValueError:
                continue
            if other.overlaps(self.net):
                raise SandboxError(f"pod subnet {self.net} overlaps the route '{line.strip()}'; "
                                   "choose another with TFK8S_NODEAGENT_SUBNET")
        if run("ip", "link", "show", self.bridge, check=False).returncode != 0:
            run("ip", "link", "add", "name", self.bridge, "type", "bridge")
        addrs = run("ip", "-o", "-4", "addr", "show", "dev", self.bridge).stdout
        if f" {self.gateway}/" not in addrs:
            run("ip", "addr", "add", f"{self.gateway}/{self.net.prefixlen}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")

    def allocate(self) -> str:
        with self._lock:
            for host in self.net.hosts():
                ip = str(host)
                if ip != self.gateway and ip not in self._used:
                    self._used.add(ip)
                    return ip
        raise SandboxError(f"no free address left in {self.net}")

    def release(self, ip: str | None) -> None:
        with self._lock:
            self._used.discard(ip or "")

    def create(self, netns: str, veth: str, ip: str, hostname_entries: str) -> None:
        """Namespace + veth on the bridge + addresses + resolver files."""
        peer = PEER_PREFIX + veth[len(VETH_PREFIX):]
        self.delete(netns, veth)  # a leftover of the same pod (agent restart)
        etc = NETNS_ETC / netns
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(hostname_entries)
        # No name server in the pod's network: lookups of unknown names fail at once.
        (etc / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        run("ip", "netns", "add", netns)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
        run("ip", "link", "set", peer, "netns", netns)
        run("ip", "link", "set", veth, "master", self.bridge, "up")
        run("ip", "-n", netns, "link", "set", peer, "name", "eth0")
        run("ip", "-n", netns, "addr", "add", f"{ip}/{self.net.prefixlen}", "dev", "eth0")
        run("ip", "-n", netns, "link", "set", "eth0", "up")
        run("ip", "-n", netns, "link", "set", "lo", "up")

    @staticmethod
    def delete(netns: str, veth: str) -> None:
        if netns in netns_list():
            kill_netns_processes(netns)
            run("ip", "netns", "del", netns, check=False)
        if run("ip", "link", "show", veth, check=False).returncode == 0:
            run("ip", "link", "del", veth, check=False)
        etc = NETNS_ETC / netns
        for name in ("hosts", "resolv.conf"):
            with contextlib.suppress(FileNotFoundError):
                (etc / name).unlink()
        with contextlib.suppress(OSError):
            etc.rmdir()


def write_in_place(path: Path, text: str) -> bool:
    """Rewrite a file keeping its inode (a bind mount of it then sees the new text)."""
    try:
        if path.read_text() == text:
            return False
    except FileNotFoundError:
        return False  # the sandbox is gone
    with open(path, "r+") as fh:
        fh.write(text)
        fh.truncate()
    return True


class MountPoints:
    """Directories the agent created on the host as bind-mount targets; removed when unused.

    A mount inside the pod's mount namespace needs its target to exist in the shared file
    system; the agent creates missing targets (and parents), records them in a file, and
    removes them again (only if empty) when no pod uses them, or at shutdown.
    """

    def __init__(self, record: Path):
        self.record = record
        self._lock = threading.Lock()
        self._users: dict[str, set[str]] = {}

    def _recorded(self) -> list[str]:
        try:
            return [p for p in self.record.read_text().splitlines() if p]
        except FileNotFoundError:
            return []

    def ensure(self, target: str, owner: str, is_file: bool = False) -> None:
        with self._lock:
            created: list[str] = []
            path = Path(target)
            missing = []
            p = path if not is_file else path.parent
            while not p.exists():
                missing.append(p)
                p = p.parent
            for d in reversed(missing):
                d.mkdir()
                created.append(str(d))
            if is_file and not path.exists():
                path.touch()
                created.append(str(path))
            if created:
                with open(self.record, "a") as fh:
                    fh.write("".join(c + "\n" for c in created))
            for c in self._recorded():
                if c == target or target.startswith(c.rstrip("/") + "/"):
                    self._users.setdefault(c, set()).add(owner)

    def release(self, owner: str) -> None:
        with self._lock:
            for users in self._users.values():
                users.discard(owner)
            self._remove_unused()

    def _remove_unused(self) -> None:
        keep = []
        for c in sorted(self._recorded(), key=len, reverse=True):
            if self._users.get(c):
                keep.append(c)
                continue
            try:
                p = Path(c)
                if p.is_file() and p.stat().st_size == 0:
                    p.unlink()
                elif p.is_dir():
                    p.rmdir()
                self._users.pop(c, None)
            except FileNotFoundError:
                self._users.pop(c, None)
            except OSError as exc:
                log.warning("leaving mount point %s: %s", c, exc)
                keep.append(c)
        self.record.write_text("".join(c + "\n" for c in sorted(keep)))

    def remove_all(self) -> None:
        with self._lock:
            self._users.clear()
            if self.record.exists():
                self._remove_unused()


def cleanup_all(state_dir: Path, bridge: str) -> list[str]:
    """Remove every sandbox leftover (needs no API server): processes, netns, veths, bridge,
    /etc/netns entries, created mount points. Returns what was removed."""
    removed = []
    for netns in netns_list():
        if netns.startswith(NETNS_PREFIX):
            kill_netns_processes(netns)
            run("ip", "netns", "del", netns, check=False)
            removed.append(f"netns {netns}")
    if NETNS_ETC.is_dir():
        for d in NETNS_ETC.iterdir():
            if d.name.startswith(NETNS_PREFIX):
                for f in d.iterdir():
                    f.unlink()
                d.rmdir()
                removed.append(f"/etc/netns/{d.name}")
    links = run("ip", "-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(VETH_PREFIX) or name == bridge:
            run("ip", "link", "del", name, check=False)
            removed.append(f"link {name}")
    MountPoints(state_dir / "mountpoints").remove_all()
    return removed
