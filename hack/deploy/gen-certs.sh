#!/usr/bin/env bash
# Generates a private CA and a serving certificate for the admission webhook.
#
# Usage: hack/deploy/gen-certs.sh OUTDIR [EXTRA_SAN...]
#
# The certificate always names Service vpa-inplace-webhook in namespace
# vpa-inplace-system (SERVICE_NAME / SERVICE_NAMESPACE override them) by all
# the DNS names the API server may use. Each EXTRA_SAN is added as an IP SAN
# when it is an IP address and as a DNS SAN otherwise; pass 127.0.0.1 when the
# API server reaches the webhook by URL on this machine.
#
# Writes OUTDIR/ca.crt, ca.key, tls.crt, tls.key (keys mode 0600). Idempotent:
# the CA is kept while it is valid for 30 more days; the serving certificate is
# kept unless its SANs changed, it is not signed by the CA, or it expires within
# 30 days.
set -o errexit -o nounset -o pipefail

if [[ $# -lt 1 || $1 == -* ]]; then
  echo "usage: $0 OUTDIR [EXTRA_SAN...]" >&2
  exit 2
fi
out=$1
shift
command -v openssl >/dev/null || { echo "error: openssl is required" >&2; exit 1; }

service=${SERVICE_NAME:-vpa-inplace-webhook}
namespace=${SERVICE_NAMESPACE:-vpa-inplace-system}
readonly renew_before=$((30 * 24 * 3600))

sans="DNS:${service},DNS:${service}.${namespace},DNS:${service}.${namespace}.svc"
sans+=",DNS:${service}.${namespace}.svc.cluster.local"
for san in "$@"; do
  if [[ ${san} =~ ^[0-9]+(\.[0-9]+){3}$ || ${san} == *:* ]]; then
    sans+=",IP:${san}"
  else
    sans+=",DNS:${san}"
  fi
done

mkdir -p "${out}"
umask 077
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

# A config of our own, so that no extension comes from the system openssl.cnf.
cat >"${work}/openssl.cnf" <<CNF
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[serving]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = ${sans}
CNF

valid() { # CERT: exists and does not expire within renew_before
  [[ -f $1 ]] && openssl x509 -in "$1" -noout -checkend "${renew_before}" >/dev/null 2>&1
}

new_ca=false
if ! valid "${out}/ca.crt" || [[ ! -f ${out}/ca.key ]]; then
  openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 \
    -config "${work}/openssl.cnf" -extensions ca -subj "/CN=vpa-inplace-webhook-ca" \
    -keyout "${work}/ca.key" -out "${work}/ca.crt" 2>"${work}/err" \
    || { cat "${work}/err" >&2; exit 1; }
  mv -f "${work}/ca.key" "${out}/ca.key"
  mv -f "${work}/ca.crt" "${out}/ca.crt"
  new_ca=true
  echo "generated CA ${out}/ca.crt"
fi

if [[ ${new_ca} == false ]] && valid "${out}/tls.crt" && [[ -f ${out}/tls.key ]] \
  && [[ "$(cat "${out}/tls.sans" 2>/dev/null)" == "${sans}" ]] \
  && openssl verify -CAfile "${out}/ca.crt" "${out}/tls.crt" >/dev/null 2>&1; then
  echo "kept ${out}/tls.crt (${sans})"
  exit 0
fi

openssl req -new -nodes -newkey rsa:2048 -sha256 -config "${work}/openssl.cnf" \
  -subj "/CN=${service}.${namespace}.svc" -keyout "${work}/tls.key" -out "${work}/tls.csr" 2>"${work}/err" \
  || { cat "${work}/err" >&2; exit 1; }
openssl x509 -req -sha256 -days 365 -in "${work}/tls.csr" -CA "${out}/ca.crt" -CAkey "${out}/ca.key" \
  -set_serial "0x$(openssl rand -hex 16)" -extfile "${work}/openssl.cnf" -extensions serving \
  -out "${work}/tls.crt" 2>"${work}/err" \
  || { cat "${work}/err" >&2; exit 1; }
# Certificate files are world-readable; only keys stay 0600.
chmod 0644 "${work}/tls.crt" "${out}/ca.crt"
mv -f "${work}/tls.key" "${out}/tls.key"
mv -f "${work}/tls.crt" "${out}/tls.crt"
echo "${sans}" >"${out}/tls.sans"
echo "generated ${out}/tls.crt (${sans})"
