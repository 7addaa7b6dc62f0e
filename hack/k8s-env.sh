#!/usr/bin/env bash
# hack/k8s-env.sh build|up|down — real etcd + kube-apiserver on 127.0.0.1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=v1.37.2
# Binaries live outside the clone so later runs on the same machine reuse them.
ASSETS=${KUBEBUILDER_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/k8s-assets/$K8S_VERSION-$(sha256sum "$HERE/k8sbin/go.sum" | cut -c1-12)}
STATE=${K8S_STATE:-$HERE/../.k8s-state}
export GOFLAGS=-buildvcs=false
now() { date +%s%3N; }
# A port below the kernel's ephemeral range (outgoing connections take those, and a listener
# cannot always bind one in use as a source port) that nothing listens on. Two runs can still
# pick the same port at the same moment: up retries with new ports when a bind fails.
free_port() { local lo hi p; read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
  hi=$(( lo - 1 )); lo=$(( hi > 12000 ? 10000 : 1025 ))
  for p in $(shuf -i "$lo-$hi" -n 50); do
  (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo "$p"; return; }; done; return 1; }

build() {
  if [ -x "$ASSETS/kube-apiserver" ] && [ -x "$ASSETS/etcd" ]; then echo "$ASSETS"; return; fi
  mkdir -p "$ASSETS"; local t=$(now)
  local ldf="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
  echo "building kube-apiserver $K8S_VERSION + etcd from the Go module proxy into $ASSETS (12–20 min on 2 cores, once per machine)" >&2
  (cd "$HERE/k8sbin" && go build -buildvcs=false -ldflags "$ldf" -o "$ASSETS/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver \
     && go build -buildvcs=false -ldflags "-s -w" -o "$ASSETS/etcd.tmp" go.etcd.io/etcd/server/v3) >&2 &
  local bpid=$!
  while kill -0 "$bpid" 2>/dev/null; do sleep 30; kill -0 "$bpid" 2>/dev/null && echo "  ... still building kube-apiserver ($(( ($(now)-t)/1000 ))s)" >&2; done
  wait "$bpid"
  mv "$ASSETS/etcd.tmp" "$ASSETS/etcd"; mv "$ASSETS/kube-apiserver.tmp" "$ASSETS/kube-apiserver"
  ln -sf "$(command -v kubectl || echo /usr/bin/kubectl)" "$ASSETS/kubectl"   # envtest wants it; unused by Start
  echo "built in $(( ($(now)-t)/1000 ))s" >&2; echo "$ASSETS"
}

up() {
  local try
  for try in 1 2 3; do
    if up_once; then return 0; fi
    grep -qs "address already in use" "$STATE/apiserver.log" "$STATE/etcd.log" || return 1
    echo "k8s-env.sh up: a port was taken meanwhile; trying again with new ports ($try)" >&2
  done
  return 1
}

up_once() {
  build >/dev/null; rm -rf "$STATE"; mkdir -p "$STATE/pki"; cd "$STATE/pki"; local t0=$(now)
  local ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  openssl req -x509 $ec -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca 2>/dev/null
  openssl req $ec -keyout srv.key -out srv.csr -subj /CN=kube-apiserver 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
  openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out srv.crt 2>/dev/null
  # The front proxy (the aggregator) authenticates to aggregated API servers (tests' metrics
  # servers) with this client certificate; they trust it through the
  # extension-apiserver-authentication ConfigMap.
  openssl req -x509 $ec -keyout front-proxy-ca.key -out front-proxy-ca.crt -days 2 -subj /CN=front-proxy-ca 2>/dev/null
  openssl req $ec -keyout front-proxy-client.key -out front-proxy-client.csr -subj /CN=front-proxy-client 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' > client.ext
  openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key -CAcreateserial -days 2 -extfile client.ext -out front-proxy-client.crt 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out sa.key; openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
  local token; token=$(openssl rand -hex 16); echo "$token,admin,admin-uid,system:masters" > tokens.csv
  local ep pp ap; ep=$(free_port); pp=$(free_port); ap=$(free_port)
  "$ASSETS/etcd" --name=t --data-dir="$STATE/etcd" --unsafe-no-fsync \
    --listen-client-urls=http://127.0.0.1:$ep --advertise-client-urls=http://127.0.0.1:$ep \
    --listen-peer-urls=http://127.0.0.1:$pp --initial-advertise-peer-urls=http://127.0.0.1:$pp \
    --initial-cluster=t=http://127.0.0.1:$pp --log-level=warn >"$STATE/etcd.log" 2>&1 &
  echo $! > "$STATE/etcd.pid"
  "$ASSETS/kube-apiserver" --etcd-servers=http://127.0.0.1:$ep \
    --bind-address=127.0.0.1 --secure-port=$ap --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --tls-cert-file=srv.crt --tls-private-key-file=srv.key --token-auth-file=tokens.csv \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file=sa.pub --service-account-signing-key-file=sa.key \
    --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=RBAC \
    --disable-admission-plugins=ServiceAccount \
    --requestheader-client-ca-file=front-proxy-ca.crt --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file=front-proxy-client.crt --proxy-client-key-file=front-proxy-client.key >"$STATE/apiserver.log" 2>&1 &
  echo $! > "$STATE/apiserver.pid"
  cat > "$STATE/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: "https://127.0.0.1:$ap", certificate-authority: "$STATE/pki/ca.crt"}}]
users: [{name: admin, user: {token: "$token"}}]
contexts: [{name: t, context: {cluster: t, user: admin}}]
current-context: t
KC
  for _ in $(seq 600); do
    if curl -fsS --cacert ca.crt -H "Authorization: Bearer $token" "https://127.0.0.1:$ap/readyz" >/dev/null 2>&1; then
      echo "ready in $(( $(now)-t0 ))ms; export KUBECONFIG=$STATE/kubeconfig" >&2; return 0; fi
    kill -0 "$(cat "$STATE/apiserver.pid")" 2>/dev/null || break; sleep 0.1
  done
  tail -20 "$STATE/apiserver.log" >&2; down; return 1
}

down() {  # stop only the processes we started, by PID
  for p in apiserver etcd; do
    [ -f "$STATE/$p.pid" ] || continue; local pid; pid=$(cat "$STATE/$p.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true; rm -f "$STATE/$p.pid"
  done
}

"${1:-up}"
