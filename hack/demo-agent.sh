#!/usr/bin/env bash
# The metalshift demo's second act: the agent-based install, as the
# assisted installer's kube-API does it (seed 001, Hive integration). An
# embedded hub runs the agent service; an AgentServiceConfig names the OS
# image and a ClusterImageSet the release; two clusters are written in the
# seed's shapes (Namespace, pull secret, ClusterDeployment,
# AgentClusterInstall, InfraEnv): `sno` (one node) and `compact` (three
# control-plane nodes behind API and ingress VIPs). sno's machine boots its
# InfraEnv's discovery ISO through its BMC as a person would and its Agent
# is approved with the seed's command; compact's machines are BareMetalHosts
# labelled for their InfraEnv (zero-touch provisioning): the host engine
# boots them from the ISO and their Agents are approved for them. The
# installs start by themselves and are followed until the clusters are
# installed; then the seed's condition listings and each installed
# cluster's Nodes, through the admin kubeconfig the hub wrote; last, a
# fourth BareMetalHost, annotated with the seed's commands, is labelled for
# compact's InfraEnv and joins the installed cluster as a day-2 worker.
# `make demo-agent` runs it (and `make demo` after hack/demo.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
dir="${METALSHIFT_DEMO_AGENT_DIR:-$(mktemp -d -t metalshift-demo-agent-XXXXXX)}"
install_timeout="${METALSHIFT_DEMO_INSTALL_TIMEOUT:-600}" # seconds, both installs
ms="${bin}/metalshift"
kubectl=("${bin}/kubectl" --kubeconfig "${dir}/hub/kubeconfig")
clusters=(sno compact)
start=${SECONDS}

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# show prints a command as a person would type it, then runs it.
show() {
	echo "$ kubectl $*"
	"${kubectl[@]}" "$@"
}

hub_pid=""
image_pid=""
sim_pids=()
cleanup() {
	status=$?
	if [[ ${status} -ne 0 && -s "${dir}/hub/kubeconfig" ]]; then
		# `metalshift gather` collects an installer's Cluster API objects;
		# the agent-based install's are these.
		"${kubectl[@]}" get agentserviceconfigs,clusterimagesets,clusterdeployments,agentclusterinstalls,infraenvs,agents,events -A -o yaml \
			> "${dir}/objects.yaml" 2>&1 || true
		echo "The hub's objects: ${dir}/objects.yaml; logs: ${dir}/hub/logs/manager.log, ${dir}/sim-*.log"
	fi
	for pid in "${sim_pids[@]}"; do
		kill "${pid}" 2>/dev/null && wait "${pid}" 2>/dev/null || true
	done
	"${ms}" hub down --dir "${dir}/hub" >/dev/null 2>&1 || true
	[[ -n "${hub_pid}" ]] && wait "${hub_pid}" 2>/dev/null || true
	[[ -n "${image_pid}" ]] && kill "${image_pid}" 2>/dev/null
	echo "Agent-based install act finished in $((SECONDS - start))s (exit ${status}). Files: ${dir}"
}
trap cleanup EXIT
mkdir -p "${dir}"

step "metalshift hub up: etcd, kube-apiserver, every controller and the agent service"
"${ms}" hub up --dir "${dir}/hub" > "${dir}/hub.log" 2>&1 &
hub_pid=$!
"${ms}" hub status --dir "${dir}/hub" --wait 2m
for _ in $(seq 50); do grep -q 'agent service' "${dir}/hub.log" && break; sleep 0.1; done
grep 'agent service' "${dir}/hub.log"
# The web console follows this act's installs live: its URL and how to sign in.
grep -A1 'web console' "${dir}/hub.log"

step "The OS image (metalshift sim image), the AgentServiceConfig 'agent' that names it, the release's ClusterImageSet"
"${ms}" sim image --size 8MiB --env "${dir}/image.env" > "${dir}/image.log" 2>&1 &
image_pid=$!
for _ in $(seq 100); do [[ -s "${dir}/image.env" ]] && break; sleep 0.1; done
# shellcheck disable=SC1091
source "${dir}/image.env"
cat > "${dir}/agent-service.yaml" <<EOF
apiVersion: agent-install.openshift.io/v1beta1
kind: AgentServiceConfig
metadata:
  name: agent
spec:
  osImages:
  - openshiftVersion: "4.16"
    version: "416.94"
    url: ${IMAGE_URL}
    cpuArchitecture: x86_64
    checksum: sha256:${IMAGE_SHA256}
---
apiVersion: hive.openshift.io/v1
kind: ClusterImageSet
metadata:
  name: openshift-v4.16.3
spec:
  releaseImage: quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64
EOF
cat "${dir}/agent-service.yaml"
"${kubectl[@]}" apply -f "${dir}/agent-service.yaml"

# cluster_yaml NAME CONTROL_PLANE_AGENTS API_VIP INGRESS_VIP writes a
# cluster in the seed's shapes; without VIPs its networking is user managed.
cluster_yaml() {
	local name=$1 masters=$2 api_vip=${3:-} ingress_vip=${4:-} networking
	if [[ -z "${api_vip}" ]]; then
		networking="    userManagedNetworking: true"
	else
		networking="  apiVIPs:
  - ${api_vip}
  ingressVIPs:
  - ${ingress_vip}"
	fi
	cat <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: ${name}
---
apiVersion: v1
kind: Secret
metadata:
  name: pull-secret
  namespace: ${name}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths":{"quay.io":{"auth":"c2ltOnNpbQ=="}}}'
---
apiVersion: hive.openshift.io/v1
kind: ClusterDeployment
metadata:
  name: ${name}
  namespace: ${name}
spec:
  clusterName: ${name}
  baseDomain: example.com
  pullSecretRef:
    name: pull-secret
  clusterInstallRef:
    group: extensions.hive.openshift.io
    version: v1beta1
    kind: AgentClusterInstall
    name: ${name}
  platform:
    agentBareMetal: {}
---
apiVersion: extensions.hive.openshift.io/v1beta1
kind: AgentClusterInstall
metadata:
  name: ${name}
  namespace: ${name}
spec:
  clusterDeploymentRef:
    name: ${name}
  imageSetRef:
    name: openshift-v4.16.3
  networking:
    clusterNetwork:
    - cidr: 10.128.0.0/14
      hostPrefix: 23
    serviceNetwork:
    - 172.30.0.0/16
${networking}
  provisionRequirements:
    controlPlaneAgents: ${masters}
    workerAgents: 0
  sshPublicKey: ssh-ed25519 AAAA user@host
---
apiVersion: agent-install.openshift.io/v1beta1
kind: InfraEnv
metadata:
  name: ${name}
  namespace: ${name}
spec:
  clusterRef:
    name: ${name}
    namespace: ${name}
  pullSecretRef:
    name: pull-secret
  sshAuthorizedKey: ssh-ed25519 AAAA user@host
EOF
}

step "Two clusters in the seed's shapes: sno (1 control-plane agent, user-managed networking), compact (3, API and ingress VIPs)"
# The compact cluster's machines are 127.43.2.10-12 (sim bmc --subnet), its VIPs on the same network.
cluster_yaml sno 1 > "${dir}/sno.yaml"
cluster_yaml compact 3 127.43.2.100 127.43.2.101 > "${dir}/compact.yaml"
echo "# ${dir}/sno.yaml"
cat "${dir}/sno.yaml"
echo
echo "# ${dir}/compact.yaml: the same objects in namespace compact; its AgentClusterInstall:"
sed -n '/^kind: AgentClusterInstall/,/^---/p' "${dir}/compact.yaml" | sed '$d'
echo
"${kubectl[@]}" apply -f "${dir}/sno.yaml" -f "${dir}/compact.yaml"

step "The discovery ISOs: each InfraEnv's status.isoDownloadURL"
declare -A iso hosts=([sno]=1 [compact]=3)
for c in "${clusters[@]}"; do
	for _ in $(seq 600); do
		iso[${c}]="$("${kubectl[@]}" -n "${c}" get infraenv "${c}" -o jsonpath='{.status.isoDownloadURL}')"
		[[ -n "${iso[${c}]}" ]] && break
		sleep 0.2
	done
	[[ -n "${iso[${c}]}" ]] || { echo "InfraEnv ${c} has no ISO after 2 minutes"; exit 1; }
done
show get infraenvs -A -o wide

step "The seed's install-config overrides, on sno's AgentClusterInstall before its install"
echo "$ kubectl annotate agentclusterinstalls.extensions.hive.openshift.io sno -n sno agent-install.openshift.io/install-config-overrides=\"{\\\"networking\\\":{\\\"networkType\\\": \\\"OVNKubernetes\\\"},\\\"fips\\\":true}\""
"${kubectl[@]}" annotate agentclusterinstalls.extensions.hive.openshift.io sno -n sno agent-install.openshift.io/install-config-overrides="{\"networking\":{\"networkType\": \"OVNKubernetes\"},\"fips\":true}"

step "sno: its machine boots the ISO through its BMC (metalshift sim bmc --boot-iso: virtual media, one-time boot from CD, power on)"
echo "metalshift sim bmc --hosts 1 --name-prefix sno --subnet 127.43.1 --mac-octet 0x31 --boot-iso \"\$(kubectl -n sno get infraenv sno -o jsonpath='{.status.isoDownloadURL}')\""
"${ms}" sim bmc --hosts 1 --name-prefix sno --subnet 127.43.1 --mac-octet 0x31 \
	--boot-iso "${iso[sno]}" --console --hub-dir "${dir}/hub" --bin-dir "${bin}" > "${dir}/sim-sno.log" 2>&1 &
sim_pids+=($!)

step "compact: four machines on a Redfish BMC, three of them BareMetalHosts labelled for the InfraEnv (ZTP), the fourth kept for day 2"
echo "metalshift sim bmc --hosts 4 --name-prefix compact --namespace compact --subnet 127.43.2 --mac-octet 0x32 \\"
echo "    --host-label infraenvs.agent-install.openshift.io=compact --host-annotation bmac.agent-install.openshift.io/role=master --manifests compact-hosts.yaml"
"${ms}" sim bmc --hosts 4 --name-prefix compact --namespace compact --subnet 127.43.2 --mac-octet 0x32 \
	--host-label infraenvs.agent-install.openshift.io=compact --host-annotation bmac.agent-install.openshift.io/role=master \
	--manifests "${dir}/compact-hosts.yaml" --console --hub-dir "${dir}/hub" --bin-dir "${bin}" > "${dir}/sim-compact.log" 2>&1 &
sim_pids+=($!)
for _ in $(seq 100); do [[ -s "${dir}/compact-hosts.yaml" ]] && break; sleep 0.1; done
# compact-3 joins after the install: in the inventory now, without the label.
awk 'BEGIN { RS = "---\n"; ORS = "---\n" } !/compact-3/' "${dir}/compact-hosts.yaml" > "${dir}/compact-day1.yaml"
awk 'BEGIN { RS = "---\n"; ORS = "---\n" } /compact-3/' "${dir}/compact-hosts.yaml" |
	grep -v -e 'infraenvs.agent-install.openshift.io: compact' -e 'bmac.agent-install.openshift.io/role: master' -e '^  labels:$' -e '^  annotations:$' \
	> "${dir}/compact-day2.yaml"
sed -n '/^kind: BareMetalHost/,/^---/p' "${dir}/compact-day1.yaml" | sed -n '1,/^---/p' | sed '$d'
"${kubectl[@]}" apply -f "${dir}/compact-day1.yaml" -f "${dir}/compact-day2.yaml"

step "Agents register, named after the machines' UUIDs: sno's approved with the seed's command, compact's by the BareMetalHost integration"
for c in "${clusters[@]}"; do
	for _ in $(seq 600); do
		# Registered, and the inventory in: the host name shows.
		[[ "$("${kubectl[@]}" -n "${c}" get agents -o jsonpath='{range .items[*]}{.status.inventory.hostname}{"\n"}{end}' 2>/dev/null |
			grep -c .)" -ge "${hosts[${c}]}" ]] && break
		sleep 0.2
	done
done
grep -h -E 'inserted|Discovery agent started' "${dir}"/sim-*.log
echo
show get agents -A -o wide
echo
for a in $("${kubectl[@]}" -n sno get agents -o jsonpath='{.items[*].metadata.name}'); do
	echo "$ kubectl -n sno patch agents.agent-install.openshift.io ${a} -p '{\"spec\":{\"approved\":true}}' --type merge"
	"${kubectl[@]}" -n sno patch agents.agent-install.openshift.io "${a}" -p '{"spec":{"approved":true}}' --type merge
done
show -n compact get bmh

step "The installs start by themselves: each cluster's state and progress, each host's stage, until installed"
# progress prints one line per cluster: its state, percentage and hosts' stages.
progress() {
	local c=$1
	"${kubectl[@]}" -n "${c}" get agentclusterinstall "${c}" \
		-o jsonpath='{.metadata.name}: {.status.debugInfo.state} {.status.progress.totalPercentage}% ({.status.debugInfo.stateInfo})' 2>/dev/null
	printf ' |'
	"${kubectl[@]}" -n "${c}" get agents \
		-o jsonpath='{range .items[*]}{" "}{.status.inventory.hostname}{"="}{.status.progress.currentStage}{end}' 2>/dev/null
	echo
}
condition() { # condition CLUSTER TYPE prints the status of the ACI's condition TYPE
	"${kubectl[@]}" -n "$1" get agentclusterinstall "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}" 2>/dev/null
}
declare -A last=() result=()
deadline=$((SECONDS + install_timeout))
while [[ ${#result[@]} -lt ${#clusters[@]} && ${SECONDS} -lt ${deadline} ]]; do
	for c in "${clusters[@]}"; do
		[[ -n "${result[${c}]:-}" ]] && continue
		line="$(progress "${c}")"
		if [[ "${line}" != "${last[${c}]:-}" ]]; then
			printf '%4ss  %s\n' "$((SECONDS - start))" "${line}"
			last[${c}]="${line}"
		fi
		if [[ "$(condition "${c}" Completed)" == True ]]; then
			result[${c}]=installed
		elif [[ "$(condition "${c}" Failed)" == True ]]; then
			result[${c}]=failed
		fi
	done
	sleep 1
done
failed=()
for c in "${clusters[@]}"; do
	echo "${c}: ${result[${c}]:-not installed after ${install_timeout}s}"
	[[ "${result[${c}]:-}" == installed ]] || failed+=("${c}")
done

step "The seed's commands: the AgentClusterInstalls' conditions, the Agents' conditions"
aci_conditions='{range .items[*]}{"\n"}{.metadata.name}{"\n"}{range .status.conditions[*]}{.type}{"\t"}{.message}{"\n"}{end}'
agent_conditions='{range .items[*]}{"\n"}{.spec.clusterDeploymentName.name}{"\n"}{.status.inventory.hostname}{"\n"}{range .status.conditions[*]}{.type}{"\t"}{.message}{"\n"}{end}'
for c in "${clusters[@]}"; do
	echo "$ kubectl get agentclusterinstalls.extensions.hive.openshift.io -n ${c} -o=jsonpath='${aci_conditions}'"
	"${kubectl[@]}" get agentclusterinstalls.extensions.hive.openshift.io -n "${c}" -o=jsonpath="${aci_conditions}"
	echo
done
for c in "${clusters[@]}"; do
	echo "$ kubectl get agents.agent-install.openshift.io -n ${c}  -o=jsonpath='${agent_conditions}'"
	"${kubectl[@]}" get agents.agent-install.openshift.io -n "${c}" -o=jsonpath="${agent_conditions}"
	echo
done

step "The installed clusters, through the admin kubeconfig in Secret <cluster>-admin-kubeconfig"
show get clusterdeployments -A -o custom-columns='NAMESPACE:.metadata.namespace,NAME:.metadata.name,INSTALLED:.spec.installed,ADMIN KUBECONFIG:.spec.clusterMetadata.adminKubeconfigSecretRef.name'
for c in "${clusters[@]}"; do
	[[ "${result[${c}]:-}" == installed ]] || continue
	echo
	echo "$ kubectl -n ${c} get secret ${c}-admin-kubeconfig -o jsonpath='{.data.kubeconfig}' | base64 -d > ${dir}/${c}.kubeconfig"
	"${kubectl[@]}" -n "${c}" get secret "${c}-admin-kubeconfig" -o jsonpath='{.data.kubeconfig}' | base64 -d > "${dir}/${c}.kubeconfig"
	echo "$ kubectl --kubeconfig ${dir}/${c}.kubeconfig get nodes -o wide"
	"${bin}/kubectl" --kubeconfig "${dir}/${c}.kubeconfig" get nodes -o wide
	"${bin}/kubectl" --kubeconfig "${dir}/${c}.kubeconfig" get clusterversion
	echo "The bare-metal operator's report (platform $("${bin}/kubectl" --kubeconfig "${dir}/${c}.kubeconfig" get infrastructure cluster -o jsonpath='{.status.platformStatus.type}')):"
	"${bin}/kubectl" --kubeconfig "${dir}/${c}.kubeconfig" get clusteroperator baremetal \
		-o jsonpath='{range .status.conditions[?(@.status=="True")]}  {.type} {.reason}: {.message}{"\n"}{end}'
done

if [[ ${#failed[@]} -gt 0 ]]; then
	echo
	echo "Not installed: ${failed[*]}"
	exit 1
fi

step "Day 2: compact-3, annotated with the seed's commands, labelled for compact's InfraEnv, joins the installed cluster"
show -n compact get bmh compact-3
echo "$ kubectl annotate bmh compact-3 -n compact bmac.agent-install.openshift.io/role=worker bmac.agent-install.openshift.io/hostname=compact-worker-0"
"${kubectl[@]}" annotate bmh compact-3 -n compact bmac.agent-install.openshift.io/role=worker bmac.agent-install.openshift.io/hostname=compact-worker-0
echo "$ kubectl annotate bmh compact-3 -n compact bmac.agent-install.openshift.io/installer-args=\"[\\\"--append-karg\\\", \\\"ip=192.0.2.2::192.0.2.254:255.255.255.0:core0.example.com:enp1s0:none\\\", \\\"--save-partindex\\\", \\\"1\\\", \\\"-n\\\"]\""
"${kubectl[@]}" annotate bmh compact-3 -n compact bmac.agent-install.openshift.io/installer-args="[\"--append-karg\", \"ip=192.0.2.2::192.0.2.254:255.255.255.0:core0.example.com:enp1s0:none\", \"--save-partindex\", \"1\", \"-n\"]"
echo "$ kubectl annotate bmh compact-3 -n compact bmac.agent-install.openshift.io/ignition-config-overrides=\"{\\\"ignition\\\": {\\\"version\\\": \\\"3.1.0\\\"}, \\\"storage\\\": {\\\"files\\\": [{\\\"path\\\": \\\"/tmp/example\\\", \\\"contents\\\": {\\\"source\\\": \\\"data:text/plain;base64,aGVscGltdHJhcHBlZGluYXN3YWdnZXJzcGVj\\\"}}]}}\""
"${kubectl[@]}" annotate bmh compact-3 -n compact bmac.agent-install.openshift.io/ignition-config-overrides="{\"ignition\": {\"version\": \"3.1.0\"}, \"storage\": {\"files\": [{\"path\": \"/tmp/example\", \"contents\": {\"source\": \"data:text/plain;base64,aGVscGltdHJhcHBlZGluYXN3YWdnZXJzcGVj\"}}]}}"
echo "$ kubectl annotate bmh compact-3 -n compact bmac.agent-install.openshift.io.agent-label.agent-label=label-value"
"${kubectl[@]}" annotate bmh compact-3 -n compact bmac.agent-install.openshift.io.agent-label.agent-label=label-value
echo "$ kubectl label bmh compact-3 -n compact infraenvs.agent-install.openshift.io=compact"
"${kubectl[@]}" label bmh compact-3 -n compact infraenvs.agent-install.openshift.io=compact
day2_start=${SECONDS}
day2=""
deadline=$((SECONDS + install_timeout))
while [[ ${SECONDS} -lt ${deadline} ]]; do
	line="$("${kubectl[@]}" -n compact get agents -l agent-label=label-value \
		-o jsonpath='{range .items[*]}{.status.inventory.hostname}{": "}{.status.debugInfo.state}{" ("}{.status.progress.currentStage}{")"}{end}' 2>/dev/null)"
	if [[ -n "${line}" && "${line}" != "${day2}" ]]; then
		printf '%4ss  compact-3 | %s\n' "$((SECONDS - start))" "${line}"
		day2="${line}"
	fi
	[[ "${line}" == *"added-to-existing-cluster (Done)"* ]] && break
	sleep 1
done
[[ "${day2}" == *"added-to-existing-cluster (Done)"* ]] || { echo "compact-3 did not join compact within ${install_timeout}s"; exit 1; }
echo "compact-3 joined compact as a day-2 worker in $((SECONDS - day2_start))s"
show -n compact get agents -o wide --show-labels
show -n compact get bmh
echo "$ kubectl --kubeconfig ${dir}/compact.kubeconfig get nodes -o wide"
"${bin}/kubectl" --kubeconfig "${dir}/compact.kubeconfig" get nodes -o wide
