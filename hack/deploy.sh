#!/bin/sh
# Installs BPA from a kustomization of config/ (default config/; an overlay that retags
# the images works too) onto the cluster of the current kubeconfig: `make deploy` runs it,
# and test/deploy runs it onto the rig's real node.
#
# The CRDs go first, and are waited for: config/default holds CRs of BPA's own kinds (the
# BPAPolicy default, the ArtifactIndex bpa-artifacts), and one `kubectl apply` of both
# fails on a fresh cluster with "no matches for kind ... ensure CRDs are installed first".
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/config}
kustomize=${KUSTOMIZE:-$root/bin/kustomize}
kubectl=${KUBECTL:-kubectl}

"$kustomize" build "$root/config/crd" | "$kubectl" apply --server-side -f -
"$kubectl" wait --for=condition=Established --timeout=60s crd -l app.kubernetes.io/part-of=bpa
"$kustomize" build "$dir" | "$kubectl" apply --server-side -f -
