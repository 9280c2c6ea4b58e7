#!/usr/bin/env bash
# Prints a kubeconfig for a new client-certificate identity signed by the control plane's CA.
#
#   mint-user.sh DIR NAME [GROUP ...]
set -euo pipefail
dir=$1; name=$2; shift 2
pki=$dir/pki
# shellcheck disable=SC1091
. "$dir/env"
subject="/CN=$name"
for group in "$@"; do subject="$subject/O=$group"; done
key=$(mktemp); csr=$(mktemp); crt=$(mktemp)
trap 'rm -f "$key" "$csr" "$crt"' EXIT
openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$key" -out "$csr" 2>/dev/null
openssl x509 -req -in "$csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 3650 -out "$crt" 2>/dev/null
b64() { base64 -w0 < "$1"; }
cat <<KC
apiVersion: v1
kind: Config
clusters:
- name: koordpy-e2e
  cluster:
    server: $API_SERVER
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(b64 "$crt")
    client-key-data: $(b64 "$key")
contexts:
- name: $name@koordpy-e2e
  context: {cluster: koordpy-e2e, user: $name}
current-context: $name@koordpy-e2e
KC
