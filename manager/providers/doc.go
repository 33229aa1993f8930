// Package providers packages the hub manager as Cluster API providers that
// `clusterctl init` installs on an existing hub: for each provider, the
// components YAML (namespace, CRDs with contract labels, RBAC, cert-manager
// Issuer and Certificates, webhook and server Services, a leader-elected
// Deployment of cmd/manager running some of its components, webhook
// configurations) and metadata.yaml, laid out as a clusterctl local
// repository.
//
// Everything is derived from what the code declares: the components'
// CRDs (component.CRDs), the generated RBAC and webhook configurations
// (package config) and the manager's flags. Nothing here is hand-written
// YAML, and the package runs nothing: hack/clusterctl-repo writes a
// repository, tests read it.
package providers
