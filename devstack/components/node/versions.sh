# Versions and paths of the node component (a real Kubernetes node: container runtime,
# kubelet, CNI, kube-proxy, CoreDNS, NetworkPolicy enforcer). Sourced after _common.sh.
# The kubelet and kube-proxy follow the control plane's version (k8s/versions.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../k8s/versions.sh"

CONTAINERD_VERSION="${TFK8S_CONTAINERD_VERSION:-v2.4.2}"
# containerd v2.4.2 is tested against runc v1.5.2; Debian 12's runc 1.1.5 is far older.
RUNC_VERSION="${TFK8S_RUNC_VERSION:-v1.5.3}"
CNI_PLUGINS_VERSION="${TFK8S_CNI_PLUGINS_VERSION:-v1.10.0}"
CRICTL_VERSION="${TFK8S_CRICTL_VERSION:-v1.37.0}"
COREDNS_VERSION="${TFK8S_COREDNS_VERSION:-v1.15.0}"
# Only its firewall (NetworkPolicy) controller runs; see README.md for why not
# kube-network-policies and why v2.1.0's advisories do not reach that controller.
KUBE_ROUTER_VERSION="${TFK8S_KUBE_ROUTER_VERSION:-v2.1.0}"
# v2.1.0 (March 2024, the newest v2 the module proxy serves) pins golang.org/x/net v0.21.0,
# grpc v1.62.0 and protobuf v1.32.0, all with published fixes since; the build raises them.
KUBE_ROUTER_DEP_UPGRADES=(golang.org/x/net@v0.63.0 google.golang.org/grpc@v1.85.0 google.golang.org/protobuf@v1.36.12)
# The busybox that the smoke test's image is made of (Debian's busybox-static package).
BUSYBOX_DEB_VERSION="${TFK8S_BUSYBOX_DEB_VERSION:-1:1.35.0-4+deb12u1+b1}"

# One cache directory per set of versions: changing any of them builds a new set.
NODE_VERSIONS="k8s=$K8S_VERSION containerd=$CONTAINERD_VERSION runc=$RUNC_VERSION cni=$CNI_PLUGINS_VERSION crictl=$CRICTL_VERSION coredns=$COREDNS_VERSION kube-router=$KUBE_ROUTER_VERSION ${KUBE_ROUTER_DEP_UPGRADES[*]}"
NODE_KEY="$K8S_VERSION-$(printf '%s' "$NODE_VERSIONS" | sha256sum | cut -c1-10)"
NODE_CACHE_DIR="$TFK8S_CACHE/node-$NODE_KEY"
NODE_BIN_DIR="$NODE_CACHE_DIR/bin"
# CNI plugins live in a directory of their own: the runtime looks them up by file name.
NODE_CNI_BIN_DIR="$NODE_CACHE_DIR/cni-bin"
NODE_IMAGE_DIR="$NODE_CACHE_DIR/images"
NODE_BINARIES=(containerd containerd-shim-runc-v2 ctr runc crictl kubelet kube-proxy coredns kube-router)
NODE_CNI_PLUGINS=(bridge host-local loopback portmap)
