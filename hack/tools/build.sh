#!/usr/bin/env bash
# Builds the pinned tools into bin/ from the Go module proxy, skipping any tool
# already built at its pinned version. Usage: hack/tools/build.sh [tool...]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${root}/bin"
stamps="${bin}/.stamps"
mkdir -p "${stamps}"

KUBE_VERSION=v1.36.3
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}"
kube_ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"
kube_ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

# clusterctl is Cluster API's, at the version the main module requires.
CAPI_VERSION="$(awk '$1 == "sigs.k8s.io/cluster-api" { print $2 }' "${root}/go.mod")"
capi_minor="${CAPI_VERSION#v*.}"
capi_ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=${CAPI_VERSION}"
capi_ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMajor=${CAPI_VERSION:1:1} -X sigs.k8s.io/cluster-api/version.gitMinor=${capi_minor%%.*}"
capi_ldflags+=" -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"

# same_capi fails unless hack/tools/clusterctl pins the main module's Cluster API.
same_capi() {
	local pinned
	pinned="$(awk '$1 == "sigs.k8s.io/cluster-api" || $2 == "sigs.k8s.io/cluster-api" { print $NF }' "${root}/hack/tools/clusterctl/go.mod")"
	if [[ "${pinned}" != "${CAPI_VERSION}" ]]; then
		echo "tools: hack/tools/clusterctl pins sigs.k8s.io/cluster-api ${pinned}, go.mod requires ${CAPI_VERSION}: update it (go get + go mod tidy there)" >&2
		exit 1
	fi
}

# stamp prints what identifies a build of a tool: its module's go.mod and
# go.sum, the linker flags and the Go version.
stamp() {
	local dir="$1"
	{ cat "${root}/hack/tools/${dir}/go.mod" "${root}/hack/tools/${dir}/go.sum"; echo "${2:-}"; go version; } | sha256sum | cut -d' ' -f1
}

# build <name> <module dir> <package> [ldflags]
build() {
	local name="$1" dir="$2" pkg="$3" ldflags="${4:--s -w}"
	local want have=""
	want="$(stamp "${dir}" "${ldflags}")"
	[[ -f "${stamps}/${name}" ]] && have="$(cat "${stamps}/${name}")"
	if [[ -x "${bin}/${name}" && "${have}" == "${want}" ]]; then
		echo "tools: ${name} is up to date"
		return
	fi
	echo "tools: building ${name} (${pkg})"
	local start=${SECONDS}
	(cd "${root}/hack/tools/${dir}" && go build -ldflags "${ldflags}" -o "${bin}/${name}.tmp" "${pkg}")
	mv "${bin}/${name}.tmp" "${bin}/${name}"
	echo "${want}" > "${stamps}/${name}"
	echo "tools: built ${name} in $((SECONDS - start))s"
}

tools=("$@")
[[ ${#tools[@]} -eq 0 ]] && tools=(etcd kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler controller-gen golangci-lint clusterctl)
for t in "${tools[@]}"; do
	case "${t}" in
	etcd) build etcd etcd ./cmd/etcd ;;
	kube-apiserver) build kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver "${kube_ldflags}" ;;
	kube-controller-manager) build kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager "${kube_ldflags}" ;;
	kubectl) build kubectl kube k8s.io/kubernetes/cmd/kubectl "${kube_ldflags}" ;;
	kubelet) build kubelet kube k8s.io/kubernetes/cmd/kubelet "${kube_ldflags}" ;;
	kube-scheduler) build kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler "${kube_ldflags}" ;;
	controller-gen) build controller-gen controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen ;;
	golangci-lint) build golangci-lint golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint ;;
	clusterctl) same_capi && build clusterctl clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl "${capi_ldflags}" ;;
	*) echo "tools: unknown tool ${t}" >&2; exit 2 ;;
	esac
done
