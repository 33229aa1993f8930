#!/usr/bin/env bash
# The metalshift demo: bring up the embedded hub, create a Cluster API
# Cluster on a MetalCluster, watch the upstream Cluster controller reconcile
# it, show how to reach the hub, and shut down. `make demo` runs it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
dir="${METALSHIFT_DEMO_DIR:-$(mktemp -d -t metalshift-demo-XXXXXX)}"
kubectl=("${bin}/kubectl" --kubeconfig "${dir}/kubeconfig")
start=${SECONDS}

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

cleanup() {
	step "Shutting the hub down"
	"${bin}/metalshift" hub down --dir "${dir}" || true
	wait "${hub_pid}" 2>/dev/null || true
	echo "Demo finished in $((SECONDS - start))s. The hub's data stays in ${dir}:"
	echo "  ${bin}/metalshift hub up --dir ${dir}    # resumes it"
}

step "Starting the hub in ${dir} (etcd, kube-apiserver, kube-controller-manager, Cluster API core, metalshift)"
mkdir -p "${dir}"
"${bin}/metalshift" hub up --dir "${dir}" > "${dir}/hub-up.log" 2>&1 &
hub_pid=$!
trap cleanup EXIT
if ! "${bin}/metalshift" hub status --dir "${dir}" --wait 3m; then
	cat "${dir}/hub-up.log"
	exit 1
fi

step "Installed CRDs (Cluster API and metalshift)"
"${kubectl[@]}" get crds -o custom-columns=NAME:.metadata.name --no-headers | grep -E 'x-k8s.io$'

step "Creating a Cluster on a MetalCluster"
cat "${root}/hack/demo/cluster.yaml"
"${kubectl[@]}" apply -f "${root}/hack/demo/cluster.yaml"

step "Waiting for the Cluster API Cluster controller to reconcile it"
"${kubectl[@]}" -n demo wait cluster/demo --for=jsonpath='{.status.initialization.infrastructureProvisioned}'=true --timeout=2m
"${kubectl[@]}" -n demo wait cluster/demo --for=jsonpath='{.status.phase}'=Provisioned --timeout=2m

step "The reconciled Cluster and its MetalCluster"
"${kubectl[@]}" -n demo get cluster,metalcluster
echo
echo "Conditions set by the upstream Cluster controller:"
"${kubectl[@]}" -n demo get cluster demo -o jsonpath='{range .status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.reason}{"\n"}{end}' |
	grep -E '^(InfrastructureReady|ControlPlaneInitialized|Available|Paused|Deleting)\b' | column -t | sed 's/^/  /'
echo "(This Cluster has no control plane yet: the OpenShiftControlPlane provider brings one.)"
echo
echo "The Cluster took its endpoint from the MetalCluster:"
"${kubectl[@]}" -n demo get cluster demo -o jsonpath='  {.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port}{"\n"}'

step "Reach the hub with kubectl"
echo "While a hub runs, every kubectl command works against it, for example:"
echo "  kubectl --kubeconfig ${dir}/kubeconfig get clusters -A"
"${kubectl[@]}" get clusters -A
