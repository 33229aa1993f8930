// Package kubeapi is a Kubernetes API server held in memory: the light twin
// of an installed cluster's kube-apiserver for fleet runs (docs/design.md,
// fidelity "fleet"), where one process serves hundreds of installed
// clusters that real kube-apiservers would not fit.
//
// It speaks the same protocol as kube-apiserver to client-go and
// controller-runtime clients, over HTTPS:
//
//   - the root paths (/), discovery (/api, /api/v1, /apis,
//     /apis/<group>[/<version>]) and /version, /healthz, /readyz, /livez;
//   - get, list (label selectors; field selectors on metadata.name and
//     metadata.namespace), watch (from a resource version, or with the
//     initial events and their closing bookmark that client-go's watch-list
//     asks for), create (generateName too), update with optimistic
//     concurrency, merge and strategic-merge patches, delete (finalizers
//     hold an object until they are removed);
//   - the status subresource (updates and patches of one half leave the
//     other alone) and certificatesigningrequests/approval;
//   - the built-in resources an installing cluster uses (namespaces, nodes,
//     secrets, configmaps, leases, CSRs, RBAC, CRDs, ...), and custom
//     resources once their CustomResourceDefinition is created (it is
//     Established at once);
//   - request bodies in JSON, YAML or, for built-in types, protobuf (what
//     controller-runtime sends); responses are JSON, which clients decode
//     whatever they asked for.
//
// Clients authenticate as with kube-apiserver: a client certificate signed
// by the cluster's CA (user = CN, groups = O), or a bootstrap token whose
// Secret is in kube-system. Authorization is a fixed policy instead of
// RBAC: system:masters may do everything; system:bootstrappers may ask
// for certificates (CSRs); system:nodes may also register Nodes, post
// their status, renew Leases and write Events. A CSR records who asked.
//
// What it does not do: admission, defaulting and validation beyond names
// and namespaces, OpenAPI, server-side apply, JSON patch, dry runs, paging
// (a list returns every item), garbage collection, or persistence. It must
// not be used where a real kube-apiserver fits: only the simulator's fleet
// mode chooses it.
package kubeapi
