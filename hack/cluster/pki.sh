#!/usr/bin/env bash
# Throwaway PKI of the local cluster (openssl; ECDSA P-256 keys, one openssl call per cert).
# Idempotent: existing files are kept.
#
#   hack/cluster/pki.sh init   DIR [NODE...]          CA, serving and component certs, SA key pair,
#                                                      one system:node:<NODE> cert per node, the
#                                                      aggregation layer's front-proxy CA and client
#                                                      cert, metrics-server's serving cert
#   hack/cluster/pki.sh client DIR NAME CN [GROUP...]  client cert DIR/NAME.{crt,key} for user CN
#                                                      in the given groups (O=), signed by the CA
#
# The client subcommand lets tests mint identities for RBAC checks, e.g.
#   hack/cluster/pki.sh client "$CLUSTER_PKI_DIR" alice alice dev-team
set -o errexit -o nounset -o pipefail

cmd=${1:?usage: pki.sh init DIR [NODE...] | pki.sh client DIR NAME CN [GROUP...]}
PKI=${2:?pki dir}
shift 2
mkdir -p "${PKI}"
cd "${PKI}"

# Minimal config: no default extensions, so exactly the -addext ones end up in each cert.
[[ -f openssl.cnf ]] || printf '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n' >openssl.cnf

newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)

ca() { # name CN   (skipped if it already exists)
  [[ -f $1.crt ]] && return 0
  openssl req -config openssl.cnf -x509 "${newkey[@]}" -keyout "$1.key" -out "$1.crt" -days 3650 \
    -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null
}
ca ca vpa-inplace-cluster-ca
# The aggregation layer's own CA: the API server proxies requests to aggregated APIs
# (metrics-server) with the front-proxy-client certificate, and those servers trust the
# user and group headers only from a client certificate of this CA (requestheader options).
ca front-proxy-ca vpa-inplace-front-proxy-ca

cert() { # name CN "O1 O2..." [SANs]   (skipped if it already exists; signed by $CERT_CA, default ca)
  local n=$1 cn=$2 orgs=$3 sans=${4:-} subj="" o
  [[ -f ${n}.crt && -f ${n}.key ]] && return 0
  for o in ${orgs}; do subj+="/O=${o}"; done
  subj+="/CN=${cn}"
  local ext=(-addext "basicConstraints=critical,CA:FALSE" -addext "keyUsage=critical,digitalSignature")
  if [[ -n ${sans} ]]; then
    ext+=(-addext "extendedKeyUsage=serverAuth,clientAuth" -addext "subjectAltName=${sans}")
  else
    ext+=(-addext "extendedKeyUsage=clientAuth")
  fi
  openssl req -config openssl.cnf "${newkey[@]}" -keyout "${n}.key.tmp" -out "${n}.crt.tmp" -days 3650 \
    -subj "${subj}" -CA "${CERT_CA:-ca}.crt" -CAkey "${CERT_CA:-ca}.key" "${ext[@]}" 2>/dev/null
  chmod 0600 "${n}.key.tmp"
  mv "${n}.key.tmp" "${n}.key"
  mv "${n}.crt.tmp" "${n}.crt"
}

case ${cmd} in
  init)
    # independent certs are generated in parallel, 16 at a time
    pending=()
    spawn() {
      cert "$@" &
      pending+=($!)
      if ((${#pending[@]} >= 16)); then reap; fi
    }
    reap() {
      local j rc=0
      for j in "${pending[@]}"; do wait "${j}" || rc=1; done
      pending=()
      ((rc == 0)) || { echo "pki.sh: certificate generation failed in ${PKI}" >&2; exit 1; }
    }
    spawn apiserver kube-apiserver "" \
      "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.0.0.1"
    spawn apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
    spawn admin kubernetes-admin system:masters
    spawn controller-manager system:kube-controller-manager ""
    spawn scheduler system:kube-scheduler ""
    for n in "$@"; do spawn "node-${n}" "system:node:${n}" system:nodes; done
    CERT_CA=front-proxy-ca spawn front-proxy-client front-proxy-client ""
    # the aggregator checks it against <service>.<namespace>.svc
    spawn metrics-server metrics-server "" "DNS:metrics-server.kube-system.svc,DNS:localhost,IP:127.0.0.1"
    if [[ ! -f sa.key ]]; then
      openssl genrsa -out sa.key.tmp 2048 2>/dev/null
      openssl rsa -in sa.key.tmp -pubout -out sa.pub 2>/dev/null
      mv sa.key.tmp sa.key
    fi
    reap
    ;;
  client)
    name=${1:?name} cn=${2:?cn}
    shift 2
    cert "${name}" "${cn}" "$*"
    echo "${PKI}/${name}.crt ${PKI}/${name}.key"
    ;;
  *) echo "unknown subcommand ${cmd}" >&2; exit 2 ;;
esac
