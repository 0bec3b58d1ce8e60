#!/bin/sh
# Makes the TLS files of the node-level cache (node-cache.yaml): a private
# CA and a server certificate for the cache's Service name, which is what
# pod sidecars dial (--cache_upstream=https://<service>.<namespace>.svc:8443)
# and verify with the CA (--cache_upstream_ca_file).
#
#   deploy/node-cache-certs.sh OUT_DIR [SERVICE [NAMESPACE]]
#
# writes OUT_DIR/ca.crt, ca.key, tls.crt, tls.key (defaults: SERVICE
# informer-node-cache, NAMESPACE informer-system). Then:
#
#   kubectl -n informer-system create secret tls informer-node-cache-tls \
#     --cert=OUT_DIR/tls.crt --key=OUT_DIR/tls.key
#
# and give ca.crt to every namespace whose pod sidecars read through the
# cache (pod-with-node-cache.yaml). Keep ca.key offline: it signs the next
# certificate (this one is valid for 365 days). With cert-manager, a
# Certificate for the same dnsNames into the same Secret does the same.
set -eu

out=${1:?usage: node-cache-certs.sh OUT_DIR [SERVICE [NAMESPACE]]}
service=${2:-informer-node-cache}
namespace=${3:-informer-system}
mkdir -p "$out"
umask 077

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -days 3650 -subj "/CN=informer node cache CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$out/ca.key" -out "$out/ca.crt" 2>/dev/null

cat > "$out/server.ext" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:$service.$namespace.svc, DNS:$service.$namespace.svc.cluster.local
EOF
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/CN=$service.$namespace.svc" \
  -keyout "$out/tls.key" -out "$out/server.csr" 2>/dev/null
openssl x509 -req -in "$out/server.csr" -CA "$out/ca.crt" \
  -CAkey "$out/ca.key" -CAcreateserial -days 365 \
  -extfile "$out/server.ext" -out "$out/tls.crt" 2>/dev/null
rm -f "$out/server.csr" "$out/server.ext" "$out/ca.srl"
chmod 0644 "$out/ca.crt" "$out/tls.crt"
echo "wrote $out/ca.crt $out/tls.crt $out/tls.key (CA key: $out/ca.key)"
