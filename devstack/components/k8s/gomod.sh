# k8s_build_gomod MODULE VERSION: print the go.mod of a throwaway main module that builds
# commands of k8s.io/kubernetes@VERSION. Sourced; needs `go` on PATH.
# Why: k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at
# v0.0.0 and resolves them with local replaces that a consumer ignores, so the consumer adds
# one replace per staging module, pointing at its published v0.<minor>.<patch> release.
k8s_build_gomod() {
  local module="$1" version="$2" gomod m
  # Outside any module: the caller is usually about to write go.mod in its own directory.
  gomod=$(cd / && GOWORK=off go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')
  [ -f "$gomod" ] || { echo "cannot find go.mod of k8s.io/kubernetes@$version" >&2; return 1; }
  echo "module $module"
  echo
  echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  sed -n 's#^\s*\(k8s\.io/[A-Za-z0-9._/-]*\)\s*=>\s*\./staging/.*#\1#p' "$gomod" | sort -u |
    while read -r m; do echo "replace $m => $m v0.${version#v1.}"; done
}

# k8s_build_ldflags VERSION: the -ldflags that stamp VERSION into a Kubernetes binary.
k8s_build_ldflags() {
  local version="$1" ldf="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$(echo "$version" | cut -d. -f2) -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ldf"
}
