# shellcheck shell=bash
# The cluster's PKI, made with openssl: one CA signs everything. Idempotent: files that
# exist are kept (a second `up` reuses them; `down` removes them with the state).

# EC P-256 keys: generating ten RSA keys took 4 s of every cold `up`.
lk_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# lk_cert NAME CN [O] [SANS]: a key and a CA-signed certificate (client+server usage).
lk_cert() {
  local name=$1 cn=$2 org=${3:-} sans=${4:-} p="$LK_RUN/pki"
  [[ -s $p/$name.crt ]] && return 0
  local subj="/CN=$cn"
  [[ -n $org ]] && subj="/O=$org$subj"
  lk_key "$p/$name.key"
  openssl req -new -key "$p/$name.key" -subj "$subj" -out "$p/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    echo "subjectKeyIdentifier=hash"
    echo "authorityKeyIdentifier=keyid,issuer"
    [[ -n $sans ]] && echo "subjectAltName=$sans"
  } >"$p/$name.ext"
  openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "$p/$name.ext" -out "$p/$name.crt" 2>/dev/null
  rm -f "$p/$name.csr" "$p/$name.ext"
}

# A kubeconfig with embedded credentials for one identity.
lk_kubeconfig() {
  local out=$1 cert=$2 p="$LK_RUN/pki"
  cat >"$out" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: localkube
  cluster:
    server: https://$LK_NODE_IP:$LK_APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$p/ca.crt")
users:
- name: $cert
  user:
    client-certificate-data: $(base64 -w0 "$p/$cert.crt")
    client-key-data: $(base64 -w0 "$p/$cert.key")
contexts:
- name: localkube
  context:
    cluster: localkube
    user: $cert
current-context: localkube
EOF
  chmod 0600 "$out"
}

lk_pki() {
  local p="$LK_RUN/pki" k="$LK_RUN/kubeconfigs"
  mkdir -p "$p" "$k"
  chmod 0700 "$p"
  if [[ ! -s $p/ca.crt ]]; then
    lk_log "creating the PKI"
    lk_key "$p/ca.key"
    # Strict verifiers (Python 3.13's ssl default, which the operator image runs) reject a
    # CA without key usage: state every extension a CA needs.
    openssl req -x509 -new -key "$p/ca.key" -subj "/CN=localkube-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -addext "subjectKeyIdentifier=hash" -out "$p/ca.crt" 2>/dev/null
  fi
  [[ -s $p/sa.key ]] || {
    lk_key "$p/sa.key"
    openssl pkey -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  }
  local d="$LK_CLUSTER_DOMAIN"
  lk_cert apiserver kube-apiserver "" \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$d,DNS:localhost,DNS:$LK_NODE_NAME,IP:127.0.0.1,IP:$LK_KUBERNETES_SVC_IP,IP:$LK_NODE_IP"
  lk_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  lk_cert admin kubernetes-admin system:masters
  lk_cert controller-manager system:kube-controller-manager
  lk_cert scheduler system:kube-scheduler
  lk_cert kube-proxy system:kube-proxy system:node-proxier
  lk_cert kubelet "system:node:$LK_NODE_NAME" system:nodes "DNS:$LK_NODE_NAME,IP:$LK_NODE_IP,IP:127.0.0.1"
  # The provisioner creates PersistentVolumes; admin rights keep it simple on a dev node.
  lk_cert provisioner localkube-provisioner system:masters
  local id
  for id in controller-manager scheduler kube-proxy kubelet provisioner; do
    [[ -s $k/$id.conf ]] || lk_kubeconfig "$k/$id.conf" "$id"
  done
  # The admin kubeconfig outside the state dir: rewritten when the CA changed.
  if ! [[ -s $LK_KUBECONFIG ]] || ! cmp -s <(grep certificate-authority-data "$LK_KUBECONFIG") \
    <(grep certificate-authority-data "$k/kubelet.conf"); then
    lk_kubeconfig "$LK_KUBECONFIG" admin
  fi
}
