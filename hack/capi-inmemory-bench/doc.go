// Command capi-inmemory-bench is the upstream anchor of metalshift's fleet
// benchmarks (docs/scale.md). It is a Go module of its own so that
// metalshift's module never depends on sigs.k8s.io/cluster-api/test.
//
// It has two modes:
//
//   - install: Cluster API core, the kubeadm bootstrap provider, the
//     KubeadmControlPlane provider and Cluster API's in-memory
//     infrastructure provider (DevCluster/DevMachine with the inMemory
//     backend) run in this process on an envtest API server; N clusters of
//     one control-plane machine and one worker, with zero provisioning
//     delays, are created at once, and the time until every Machine runs a
//     Node is printed as "RESULT install clusters=N seconds=S".
//   - memory: N installed clusters' API servers, either Cluster API's
//     in-memory server (-server upstream) or metalshift's sim/kubeapi
//     (-server ours), each holding the objects an installed cluster holds,
//     and the memory they take per cluster ("RESULT memory ..."); then a
//     few probes of what the fleet twin needs ("FIDELITY ...").
//
// It is a benchmark tool: it must not be imported, and nothing of it ships.
package main
