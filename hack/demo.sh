#!/usr/bin/env bash
# The metalshift demo: six simulated bare-metal machines behind a Redfish BMC
# emulator; an install-config for 3 masters + 2 workers on them (the sixth
# machine hosts the bootstrap node); `metalshift create cluster` brings up the
# embedded hub, applies the Cluster API objects and reports progress until
# the simulated OpenShift cluster is installed; then the workers scale to 3
# and back to 2, and `metalshift destroy cluster` returns every host.
# `make demo` runs it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
dir="${METALSHIFT_DEMO_DIR:-$(mktemp -d -t metalshift-demo-XXXXXX)}"
vip="${METALSHIFT_DEMO_VIP:-127.42.0.10}"
ms="${bin}/metalshift"
start=${SECONDS}

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

sim_pid=""
image_pid=""
cleanup() {
	status=$?
	if [[ ${status} -ne 0 && -d "${dir}/hub" ]]; then
		"${ms}" gather --dir "${dir}" || true
	fi
	"${ms}" hub down --dir "${dir}/hub" >/dev/null 2>&1 || true
	[[ -n "${sim_pid}" ]] && kill "${sim_pid}" 2>/dev/null && wait "${sim_pid}" 2>/dev/null
	[[ -n "${image_pid}" ]] && kill "${image_pid}" 2>/dev/null
	echo "Demo finished in $((SECONDS - start))s (exit ${status}). Files: ${dir}"
}
trap cleanup EXIT
mkdir -p "${dir}"

step "Simulated hardware: 6 machines behind a Redfish BMC emulator, and an OS image server"
# Their BMCs trust the CA of the hub that create cluster starts in ${dir}/hub.
"${ms}" sim bmc --hosts 6 --namespace demo --manifests "${dir}/hosts.yaml" --hub-dir "${dir}/hub" > "${dir}/sim.log" 2>&1 &
sim_pid=$!
"${ms}" sim image --size 8MiB --env "${dir}/image.env" > "${dir}/image.log" 2>&1 &
image_pid=$!
for _ in $(seq 100); do [[ -s "${dir}/hosts.yaml" && -s "${dir}/image.env" ]] && break; sleep 0.1; done
cat "${dir}/sim.log"
# shellcheck disable=SC1091
source "${dir}/image.env"

step "metalshift create install-config: 3 masters, 2 workers, API VIP ${vip}"
"${ms}" create install-config --dir "${dir}" --name demo --base-domain example.com --api-vip "${vip}" \
	--masters 3 --workers 2 --hosts-from "${dir}/hosts.yaml" --os-image-url "${IMAGE_URL}" --os-image-checksum "${IMAGE_SHA256}"
grep -v -E 'password|pullSecret' "${dir}/install-config.yaml" | sed -n '1,30p'
echo "  ..."

step "metalshift create manifests"
"${ms}" create manifests --dir "${dir}"
ls "${dir}/cluster-api" | sed 's/^/  /' | head -30

step "metalshift create cluster (embedded hub + every controller; progress until installed)"
"${ms}" create cluster --dir "${dir}" --timeout 10m

kubectl=("${bin}/kubectl" --kubeconfig "${dir}/hub/kubeconfig" -n demo)
oc=("${bin}/kubectl" --kubeconfig "${dir}/auth/kubeconfig")

step "The installed cluster: kubectl --kubeconfig ${dir}/auth/kubeconfig get nodes"
"${oc[@]}" get nodes -o wide
echo
"${oc[@]}" get clusterversion
"${oc[@]}" get clusteroperators

step "The bare-metal operator in the installed cluster: the baremetal ClusterOperator is its report"
"${oc[@]}" get clusteroperator baremetal -o jsonpath='{range .status.conditions[*]}  {.type}={.status} {.reason}: {.message}{"\n"}{end}'
echo "A Provisioning singleton (provisioning network Disabled) makes it deploy the metal3 Deployment: metalshift's host engine"
"${oc[@]}" apply -f - <<'YAML'
apiVersion: metal3.io/v1alpha1
kind: Provisioning
metadata:
  name: provisioning-configuration
spec:
  provisioningNetwork: Disabled
YAML
# The operator first issues the deploy server's certificate, then writes the Deployment.
"${oc[@]}" -n openshift-machine-api wait deployment/metal3 --for=create --timeout=2m
"${oc[@]}" -n openshift-machine-api wait deployment/metal3 --for=condition=Available --timeout=2m
"${oc[@]}" -n openshift-machine-api get deployments,pods -o wide
"${oc[@]}" wait clusteroperator baremetal --for=jsonpath='{.status.conditions[?(@.type=="Available")].reason}'=DeployComplete --timeout=2m
"${oc[@]}" get clusteroperator baremetal -o jsonpath='{range .status.conditions[*]}  {.type}={.status} {.reason}: {.message}{"\n"}{end}'
echo "An invalid edit is refused by the operator's webhook, naming the field:"
if "${oc[@]}" patch provisioning provisioning-configuration --type merge -p '{"spec":{"provisioningNetwork":"Managed","provisioningIP":"not-an-ip"}}'; then
	echo "the invalid Provisioning was accepted" >&2
	exit 1
fi

step "The hub: Machines (all Running, with their Nodes), the control plane, the hosts"
"${kubectl[@]}" get machines
"${kubectl[@]}" get openshiftcontrolplane
"${kubectl[@]}" get bmh

step "Scaling the workers to 3 (the host the bootstrap node returned takes the new one)"
"${kubectl[@]}" scale machinedeployment demo-worker --replicas 3
"${kubectl[@]}" wait machinedeployment demo-worker --for=jsonpath='{.status.readyReplicas}'=3 --timeout=5m
"${oc[@]}" get nodes

step "Scaling the workers back to 2: Cluster API cordons and drains the node first"
"${kubectl[@]}" scale machinedeployment demo-worker --replicas 2
seen=""
for _ in $(seq 600); do
	cordoned="$("${oc[@]}" get nodes -o jsonpath='{range .items[?(@.spec.unschedulable==true)]}{.metadata.name}{"\n"}{end}' 2>/dev/null || true)"
	if [[ -n "${cordoned}" && -z "${seen}" ]]; then
		seen="${cordoned}"
		echo "Cordoned: ${cordoned}"
		"${oc[@]}" get nodes
	fi
	[[ "$("${oc[@]}" get nodes --no-headers 2>/dev/null | wc -l)" -eq 5 && -n "${seen}" ]] && break
	sleep 0.2
done
"${kubectl[@]}" wait machinedeployment demo-worker --for=jsonpath='{.status.replicas}'=2 --timeout=5m
"${oc[@]}" get nodes
"${kubectl[@]}" get machines

step "Hub memory (peak resident set size, VmHWM)"
hub_pid="$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "${dir}/hub/hub.json")"
for pid in ${hub_pid} $(for f in "${dir}"/hub/run/*.pid; do cat "${f}"; echo; done 2>/dev/null); do
	printf '  %-24s %s\n' "$(tr -d '\0' < "/proc/${pid}/comm" 2>/dev/null)" "$(grep VmHWM "/proc/${pid}/status" 2>/dev/null | awk '{printf "%d MiB", $2/1024}')"
done

step "metalshift destroy cluster: every host back to available, nothing left on the hub"
"${ms}" destroy cluster --dir "${dir}"
