//go:build tools

// Package kube pins the Kubernetes binaries that the tests and the embedded
// control plane run (kubelet and kube-scheduler: the real node of the
// node e2e). It is never imported; hack/tools/build.sh builds its
// imports into bin/.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
