// Package config embeds the manifests the hub installs: metalshift's
// generated CRDs (crd/bases) and admission webhook configurations
// (webhook/, from the kubebuilder markers of the webhooks packages), and
// the upstream Cluster API core CRDs and webhook configurations (capi/,
// copied from the sigs.k8s.io/cluster-api module by `make generate`). It
// only parses; it never talks to a cluster.
package config
