"""Each pod's hosts file: the DNS of the devstack node, one file per network namespace.

Why: TF_CONFIG names peers as ``<hostname>.<subdomain>.<namespace>.svc:2222`` and there is
no cluster DNS here. ``ip netns exec`` bind-mounts ``/etc/netns/<netns>/hosts`` over
``/etc/hosts`` in each container, so the file maps the pod's own names, its peers (the pods
of this node with the same ``subdomain`` in the namespace, when a Service of that name
exists; not-ready ones too with ``publishNotReadyAddresses``) and this machine's host name
to the host address. The files are rewritten in place as peers come and go, so running
pods see later peers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import sandbox

if TYPE_CHECKING:
    from podworker import PodWorker

log = logging.getLogger("nodeagent")


def hosts_file(me: PodWorker, workers: Iterable[PodWorker], services: Mapping[tuple[str, str], dict[str, Any]],
               host_name: str, host_addr: str) -> str:
    """The hosts file of pod ``me`` among ``workers`` (this node's pods)."""
    own = [f"{me.hostname}.{me.subdomain}.{me.namespace}.svc.cluster.local",
           f"{me.hostname}.{me.subdomain}.{me.namespace}.svc", f"{me.hostname}.{me.subdomain}"] \
        if me.subdomain else []
    lines = ["# tfk8s node agent: hosts of pod " + me.key,
             "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
             f"{me.ip}\t" + " ".join(own + [me.hostname])]
    if host_name and host_name != me.hostname:
        lines.append(f"{host_addr}\t{host_name}")
    if me.subdomain:
        svc = services.get((me.namespace, me.subdomain))
        if svc is not None:
            not_ready_ok = bool(svc.get("spec", {}).get("publishNotReadyAddresses"))
            peers = sorted((w for w in workers
                            if w is not me and w.sandbox_ready and w.ip and w.namespace == me.namespace
                            and w.subdomain == me.subdomain and (not_ready_ok or w.ready())),
                           key=lambda w: w.hostname)
            for w in peers:
                base = f"{w.hostname}.{w.subdomain}.{w.namespace}.svc"
                lines.append(f"{w.ip}\t{base}.cluster.local {base} {w.hostname}.{w.subdomain}")
    return "\n".join(lines) + "\n"


def rewrite_hosts_files(workers: Iterable[PodWorker], render: Callable[[PodWorker], str]) -> None:
    """Rewrite (in place) the hosts file of every pod with a sandbox whose ``render`` changed."""
    for w in workers:
        if not w.sandbox_ready:
            continue
        text = render(w)
        if text != w.hosts_text:
            if sandbox.write_in_place(sandbox.NETNS_ETC / w.netns / "hosts", text):
                log.info("%s: hosts file now has %d peers", w.key,
                         max(text.count(".svc.cluster.local") - 1, 0))
            w.hosts_text = text
