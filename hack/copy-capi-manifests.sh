#!/usr/bin/env bash
# Copies the upstream Cluster API core CRDs, webhook configurations and RBAC from
# the sigs.k8s.io/cluster-api module (the version in go.mod) into
# config/capi, where the hub embeds them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
src="$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
version="$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)"
dst=config/capi
rm -f "${dst}"/crd/*.yaml
mkdir -p "${dst}/crd" "${dst}/webhook" "${dst}/rbac"
# The CRDs the core manager serves, as listed by its kustomization.
for f in $(sed -n 's#^- bases/\(.*\.yaml\)$#\1#p' "${src}/core/config/crd/kustomization.yaml"); do
	install -m 0644 "${src}/core/config/crd/bases/${f}" "${dst}/crd/${f}"
done
install -m 0644 "${src}/core/config/webhook/manifests.yaml" "${dst}/webhook/manifests.yaml"
# The core manager's ClusterRole, which the core provider's components grant.
install -m 0644 "${src}/core/config/rbac/role.yaml" "${dst}/rbac/role.yaml"
echo "${version}" > "${dst}/VERSION"
