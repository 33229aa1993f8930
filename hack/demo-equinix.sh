#!/usr/bin/env bash
# The metalshift demo's Equinix Metal act: an emulator of the Equinix Metal
# API whose devices are simulated machines; an install-config for 3 masters
# + 2 workers on platform.equinixMetal; `metalshift create cluster` reserves
# the cluster's elastic IPs, brings up the embedded hub and installs through
# the bootstrap node, each device booting the hub's signed iPXE script and
# installing its disk from the metadata service; then the workers scale to 3
# and back to 2, `metalshift destroy cluster` deletes every device and
# address, and the emulator's ledger shows nothing left.
# `make demo-equinix` runs it (and `make demo`, as its third act).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
dir="${METALSHIFT_DEMO_DIR:-$(mktemp -d -t metalshift-demo-equinix-XXXXXX)}"
ms="${bin}/metalshift"
start=${SECONDS}
step_start=${SECONDS}

step() {
	if [[ ${SECONDS} -gt ${start} ]]; then printf '  (%ds)\n' "$((SECONDS - step_start))"; fi
	step_start=${SECONDS}
	printf '\n\033[1m==> %s\033[0m\n' "$*"
}

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
	echo "Equinix Metal demo finished in $((SECONDS - start))s (exit ${status}). Files: ${dir}"
}
trap cleanup EXIT
mkdir -p "${dir}"

step "An emulated Equinix Metal: its API, its metadata service, devices that are simulated machines; and an OS image server"
"${ms}" sim equinix --project demo --backend light > "${dir}/metal.env" 2> "${dir}/sim.log" &
sim_pid=$!
"${ms}" sim image --size 8MiB --env "${dir}/image.env" > "${dir}/image.log" 2>&1 &
image_pid=$!
for _ in $(seq 100); do [[ -s "${dir}/image.env" ]] && grep -q METAL_AUTH_TOKEN "${dir}/metal.env" 2>/dev/null && break; sleep 0.1; done
# shellcheck disable=SC1091
source "${dir}/image.env"
# shellcheck disable=SC1091
set -a; source "${dir}/metal.env"; set +a
echo "API ${METAL_API_URL}, metadata service ${METAL_METADATA_URL}, project ${METAL_PROJECT_ID}"

step "The install-config: platform.equinixMetal, 3 masters, 2 workers (the API key is \$METAL_AUTH_TOKEN)"
cat > "${dir}/install-config.yaml" <<YAML
apiVersion: v1
baseDomain: example.com
metadata: {name: demo}
controlPlane: {name: master, replicas: 3}
compute: [{name: worker, replicas: 2}]
platform:
  equinixMetal:
    projectID: ${METAL_PROJECT_ID}
    metro: sv
    apiURL: ${METAL_API_URL}
    metadataURL: ${METAL_METADATA_URL}
    defaultMachinePlatform: {plan: c3.small.x86, tags: [demo=equinix]}
pullSecret: '{"auths":{"quay.io":{"auth":"ZGVtbzpkZW1v"}}}'
metalshift:
  osImage: {url: "${IMAGE_URL}", checksum: "${IMAGE_SHA256}"}
YAML
cat "${dir}/install-config.yaml"

step "metalshift create manifests: the elastic IPs are reserved and written into the install-config"
"${ms}" create manifests --dir "${dir}"
grep -E 'apiVIP|ingressVIP' "${dir}/install-config.yaml"

step "metalshift create cluster (embedded hub + every controller; progress until installed)"
"${ms}" create cluster --dir "${dir}" --timeout 10m

kubectl=("${bin}/kubectl" --kubeconfig "${dir}/hub/kubeconfig" -n demo)
oc=("${bin}/kubectl" --kubeconfig "${dir}/auth/kubeconfig")

step "The installed cluster"
"${oc[@]}" get nodes -o wide
"${oc[@]}" get infrastructure cluster -o jsonpath='{.status.platformStatus}{"\n"}'
"${oc[@]}" get clusterversion

step "The hub: Machines, EquinixMetalMachines (devices), the EquinixMetalCluster"
"${kubectl[@]}" get machines
"${kubectl[@]}" get equinixmetalmachines
"${kubectl[@]}" get equinixmetalclusters

step "Scaling the workers to 3: a new device"
"${kubectl[@]}" scale machinedeployment demo-worker --replicas 3
"${kubectl[@]}" wait machinedeployment demo-worker --for=jsonpath='{.status.readyReplicas}'=3 --timeout=5m
"${oc[@]}" get nodes

step "Scaling the workers back to 2: its device is deleted"
"${kubectl[@]}" scale machinedeployment demo-worker --replicas 2
"${kubectl[@]}" wait machinedeployment demo-worker --for=jsonpath='{.status.replicas}'=2 --timeout=5m
"${kubectl[@]}" get equinixmetalmachines

step "metalshift destroy cluster: every device and address deleted"
"${ms}" destroy cluster --dir "${dir}"

step "API requests the emulator served, per device the provider created"
requests="$(curl -s "${METAL_API_URL%/metal/v1}/_requests")"
total="$(grep -o '":[0-9]*' <<<"${requests}" | tr -d '":' | awk '{s+=$1} END {print s+0}')"
devices="$(grep -o '"POST /metal/v1/projects/{id}/devices":[0-9]*' <<<"${requests}" | sed 's/.*://')"
echo "${total} requests for ${devices:-0} devices (bootstrap node, 3 masters, 3 workers over the run): $(awk -v t="${total}" -v d="${devices:-1}" 'BEGIN {printf "%.1f", t/d}') per device"
tr ',' '\n' <<<"${requests}" | sed -e 's/^{//' -e 's/}$//' -e 's/^/  /'

step "The emulator's ledger: nothing left"
ledger="$(curl -s "${METAL_API_URL%/metal/v1}/_ledger")"
echo "${ledger}"
if [[ "${ledger}" != *'"devices":[]'* || "${ledger}" != *'"ip_reservations":[]'* ]]; then
	echo "the ledger is not empty" >&2
	exit 1
fi
