# Helpers of the node component. Sourced after _common.sh and versions.sh.

# json_str STRING: STRING as a JSON string literal (only what our names and paths contain).
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

# oci_image_from_rootfs ROOTFS NAME OUT [CMD...]: pack the directory ROOTFS as a one-layer
# OCI image archive OUT (what `ctr images import` and `ctr images export` use) named NAME
# (e.g. tfk8s.local/busybox:1.35.0) for linux/amd64, with CMD as its default command.
# Why by hand: no registry is reachable, and a single uncompressed layer needs only tar and
# sha256sum. The layer is reproducible: sorted, owned by root, mtime 0.
oci_image_from_rootfs() {
  local rootfs="$1" name="$2" out="$3"; shift 3
  local d layer_sha layer_size cfg cfg_sha cfg_size man man_sha man_size cmd="" a
  d="$(mktemp -d "${out}.XXXXXX")"
  mkdir -p "$d/blobs/sha256"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$rootfs" -cf "$d/layer.tar" .
  layer_sha="$(sha256sum "$d/layer.tar" | cut -d' ' -f1)"
  layer_size="$(stat -c %s "$d/layer.tar")"
  mv "$d/layer.tar" "$d/blobs/sha256/$layer_sha"
  for a in "$@"; do cmd="${cmd:+$cmd,}$(json_str "$a")"; done
  cfg="{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/usr/sbin:/usr/bin:/sbin:/bin\"],\"Cmd\":[$cmd],\"WorkingDir\":\"/\"},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$layer_sha\"]},\"history\":[{\"created_by\":\"tfk8s devstack oci_image_from_rootfs\"}]}"
  printf '%s' "$cfg" > "$d/cfg"
  cfg_sha="$(sha256sum "$d/cfg" | cut -d' ' -f1)"; cfg_size="$(stat -c %s "$d/cfg")"
  mv "$d/cfg" "$d/blobs/sha256/$cfg_sha"
  man="{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$cfg_sha\",\"size\":$cfg_size},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"sha256:$layer_sha\",\"size\":$layer_size}]}"
  printf '%s' "$man" > "$d/man"
  man_sha="$(sha256sum "$d/man" | cut -d' ' -f1)"; man_size="$(stat -c %s "$d/man")"
  mv "$d/man" "$d/blobs/sha256/$man_sha"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$d/oci-layout"
  # containerd names the image after io.containerd.image.name; ref.name is the OCI tag.
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":%s,"org.opencontainers.image.ref.name":%s}}]}' \
    "$man_sha" "$man_size" "$(json_str "$name")" "$(json_str "${name##*:}")" > "$d/index.json"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$d" -cf "$out.tmp" oci-layout index.json blobs
  mv -f "$out.tmp" "$out"
  rm -rf "$d"
}

# busybox_image OUT: a busybox image archive (Debian's busybox-static, every applet linked in
# /bin), named tfk8s.local/busybox:<upstream version>, built once and cached at OUT.
busybox_image() {
  local out="$1" d deb
  [ -s "$out" ] && return 0
  d="$(mktemp -d "${out}.src.XXXXXX")"
  # apt-get download needs the package lists; refresh them once if the version is unknown.
  if ! (cd "$d" && apt-get download "busybox-static=$BUSYBOX_DEB_VERSION") >"$d/apt.log" 2>&1; then
    apt-get update >>"$d/apt.log" 2>&1 || true
    (cd "$d" && apt-get download "busybox-static=$BUSYBOX_DEB_VERSION") >>"$d/apt.log" 2>&1 ||
      { cat "$d/apt.log" >&2; rm -rf "$d"; return 1; }
  fi
  deb="$(ls "$d"/busybox-static_*.deb)"
  dpkg-deb -x "$deb" "$d/pkg"
  mkdir -p "$d/rootfs/bin" "$d/rootfs/dev" "$d/rootfs/proc" "$d/rootfs/sys" "$d/rootfs/tmp" \
    "$d/rootfs/etc" "$d/rootfs/root"
  chmod 1777 "$d/rootfs/tmp"
  cp "$d/pkg/bin/busybox" "$d/rootfs/bin/busybox"
  local a
  for a in $("$d/rootfs/bin/busybox" --list); do
    [ "$a" = busybox ] || ln -s busybox "$d/rootfs/bin/$a"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$d/rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$d/rootfs/etc/group"
  local ver="${BUSYBOX_DEB_VERSION#*:}"; ver="${ver%%-*}"
  oci_image_from_rootfs "$d/rootfs" "tfk8s.local/busybox:$ver" "$out" sh
  rm -rf "$d"
}
