# PKI for the loopback control plane: one CA, serving and client certificates, a
# service-account key pair and one kubeconfig per client. Sourced by `up`; created once and
# reused across restarts (removed by `down --purge`).

# _cert NAME SUBJECT [SAN]: key + certificate signed by the devstack CA.
_cert() {
  local name="$1" subj="$2" san="${3:-}" ext
  [ -s "$PKI/$name.crt" ] && return 0
  ext="$PKI/$name.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$san"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$ext"
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
}

# _kubeconfig FILE CERTNAME: kubeconfig for a client certificate against our apiserver.
_kubeconfig() {
  local file="$1" name="$2"
  cat >"$file" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: tfk8s-devstack
  cluster:
    server: $APISERVER_URL
    certificate-authority: $PKI/ca.crt
users:
- name: $name
  user:
    client-certificate: $PKI/$name.crt
    client-key: $PKI/$name.key
contexts:
- name: tfk8s-devstack
  context:
    cluster: tfk8s-devstack
    user: $name
    namespace: default
current-context: tfk8s-devstack
KCFG
  chmod 600 "$file"
}

make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  local san="IP:127.0.0.1,DNS:localhost"
  if [ ! -s "$PKI/ca.crt" ]; then
    openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=tfk8s-devstack-ca" -days 3650 \
      -sha256 -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "$PKI/ca.crt" 2>/dev/null
  fi
  # Front-proxy CA for the request-header authenticator (aggregated APIs; also silences the
  # controllers' "missing content for CA bundle" errors).
  if [ ! -s "$PKI/front-proxy-ca.crt" ]; then
    openssl genrsa -out "$PKI/front-proxy-ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$PKI/front-proxy-ca.key" -subj "/CN=tfk8s-devstack-front-proxy-ca" \
      -days 3650 -sha256 -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "$PKI/front-proxy-ca.crt" 2>/dev/null
  fi
  if [ ! -s "$PKI/front-proxy-client.crt" ]; then
    openssl genrsa -out "$PKI/front-proxy-client.key" 2048 2>/dev/null
    openssl req -new -key "$PKI/front-proxy-client.key" -subj "/CN=front-proxy-client" \
      -out "$PKI/front-proxy-client.csr" 2>/dev/null
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
      >"$PKI/front-proxy-client.ext"
    openssl x509 -req -in "$PKI/front-proxy-client.csr" -CA "$PKI/front-proxy-ca.crt" \
      -CAkey "$PKI/front-proxy-ca.key" -CAcreateserial -days 3650 -sha256 \
      -extfile "$PKI/front-proxy-client.ext" -out "$PKI/front-proxy-client.crt" 2>/dev/null
    rm -f "$PKI/front-proxy-client.csr" "$PKI/front-proxy-client.ext"
  fi
  _cert etcd "/CN=etcd" "$san"
  _cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client"
  _cert apiserver "/CN=kube-apiserver" \
    "$san,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  _cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  _cert admin "/O=system:masters/CN=tfk8s-admin"
  _cert kube-controller-manager "/CN=system:kube-controller-manager"
  _cert kube-scheduler "/CN=system:kube-scheduler"
  # kwok plays the kubelet of many nodes, which the Node authorizer cannot express.
  _cert kwok "/O=system:masters/CN=kwok-controller"
  _cert kwok-serving "/CN=kwok-kubelet" "$san"
  _cert kcm-serving "/CN=kube-controller-manager" "$san"
  _cert scheduler-serving "/CN=kube-scheduler" "$san"
  if [ ! -s "$PKI/sa.key" ]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  chmod 600 "$PKI"/*.key
  _kubeconfig "$KUBECONFIG_ADMIN" admin
  _kubeconfig "$K8S_STATE/kube-controller-manager.kubeconfig" kube-controller-manager
  _kubeconfig "$K8S_STATE/kube-scheduler.kubeconfig" kube-scheduler
  _kubeconfig "$K8S_STATE/kwok.kubeconfig" kwok
}
