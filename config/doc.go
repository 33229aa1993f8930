// Package config embeds the manifests the hub installs: metalshift's
// generated CRDs (crd/bases) and admission webhook configurations
// (webhook/, from the kubebuilder markers of the webhooks packages), the
// roles of the clusterctl providers and of the bare-metal operator
// (rbac/<name>/, each from the RBAC markers of its own packages only), and
// the upstream Cluster API core CRDs, webhook configurations and role
// (capi/, copied from the sigs.k8s.io/cluster-api module by `make
// generate`). It
// only parses; it never talks to a cluster.
package config
