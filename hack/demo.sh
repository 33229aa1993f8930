#!/usr/bin/env bash
# The metalshift demo: bring up the embedded hub, create a Cluster API
# Cluster on a MetalCluster and watch the upstream Cluster controller
# reconcile it; start simulated machines behind a Redfish BMC emulator, let
# the host engine register, inspect and provision one; show how to reach the
# hub, and shut down. `make demo` runs it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
dir="${METALSHIFT_DEMO_DIR:-$(mktemp -d -t metalshift-demo-XXXXXX)}"
kubectl=("${bin}/kubectl" --kubeconfig "${dir}/kubeconfig")
start=${SECONDS}

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

sim_pid=""
http_pid=""
cleanup() {
	[[ -n "${sim_pid}" ]] && kill "${sim_pid}" 2>/dev/null
	[[ -n "${http_pid}" ]] && kill "${http_pid}" 2>/dev/null
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

step "Simulated hardware: 3 machines behind a Redfish BMC emulator"
"${bin}/metalshift" sim bmc --hosts 3 --hub-dir "${dir}" --namespace demo --manifests "${dir}/hosts.yaml" > "${dir}/sim.log" 2>&1 &
sim_pid=$!
for _ in $(seq 50); do [[ -s "${dir}/hosts.yaml" ]] && break; sleep 0.1; done
cat "${dir}/sim.log"
"${kubectl[@]}" apply -f "${dir}/hosts.yaml"

step "The host engine registers and inspects them over Redfish (no Ironic)"
"${kubectl[@]}" -n demo wait bmh --all --for=jsonpath='{.status.provisioning.state}'=available --timeout=2m
"${kubectl[@]}" -n demo get bmh
echo
echo "Inspected hardware of host-0:"
"${kubectl[@]}" -n demo get bmh host-0 -o jsonpath='  {.status.hardware.cpu.count} CPUs ({.status.hardware.cpu.arch}), {.status.hardware.ramMebibytes} MiB RAM, NICs {.status.hardware.nics[*].mac}{"\n"}'

step "Provisioning host-0: spec.image and spec.userData, through the deploy agent"
"${bin}/metalshift" sim image --size 8MiB --env "${dir}/image.env" > "${dir}/image.log" 2>&1 &
http_pid=$!
for _ in $(seq 50); do [[ -s "${dir}/image.env" ]] && break; sleep 0.1; done
# shellcheck disable=SC1091
source "${dir}/image.env"
"${kubectl[@]}" -n demo create secret generic host-0-user-data --from-literal=userData='{"ignition":{"version":"3.4.0"}}'
"${kubectl[@]}" -n demo patch bmh host-0 --type=merge -p "{\"spec\":{\"online\":true,\"userData\":{\"name\":\"host-0-user-data\"},\"image\":{\"url\":\"${IMAGE_URL}\",\"checksum\":\"${IMAGE_SHA256}\",\"checksumType\":\"sha256\"}}}"
"${kubectl[@]}" -n demo wait bmh host-0 --for=jsonpath='{.status.provisioning.state}'=provisioned --timeout=3m
"${kubectl[@]}" -n demo get bmh
kill "${http_pid}" "${sim_pid}" 2>/dev/null || true

step "Reach the hub with kubectl"
echo "While a hub runs, every kubectl command works against it, for example:"
echo "  kubectl --kubeconfig ${dir}/kubeconfig get clusters -A"
"${kubectl[@]}" get clusters -A
