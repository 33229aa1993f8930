// Package cluster simulates what runs on machines once they boot an
// installed OpenShift disk: it reads the Ignition config the host engine
// wrote to the config drive and behaves as the OS would.
//
// A bootstrap node's config (the bootstrap service, install-config, root CA,
// admin kubeconfig, manifests) starts the installed cluster's control plane:
// a real kube-apiserver sharing the simulator's one etcd under its own prefix,
// listening on the API VIP (a loopback address) at :6443, with DNS names
// api and api-int.<cluster>.<baseDomain> registered in the simulated network;
// a machine-config-server on the VIP at :22623; the user's manifests applied;
// and a cluster-version loop that moves ClusterOperators and ClusterVersion
// to Available as Nodes join. A master or worker pointer config fetches its
// pool's config from that machine-config-server (verifying the root CA it
// carries), then registers a Node with the providerID of its metadata and
// reports it Ready. The cluster stops when the last of its machines powers off.
//
// With Options.Runtime, a cluster also runs workloads (pods.go,
// workloads.go): the bare-metal operator's manifests as a release payload
// carries them, kube-controller-manager's Deployment and ReplicaSet
// controllers, a scheduler, OpenShift's service-ca, and kubelets that run
// Pods as kwok does, except containers of images the Runtime runs (the
// manager's), which run for real. The baremetal ClusterOperator is then the
// real operator's report.
//
// With Options.APIServer InMemoryAPIServer (the fleet fidelity level, for
// scale benchmarks) each cluster's API is served by sim/kubeapi in this
// process instead of a kube-apiserver, at the same address with the same
// certificates and credentials; the rest (bootstrap content, kubelets,
// CSRs, the cluster-version loop) runs unchanged against it.
//
// Nothing outside sim/ knows this is simulated: the hub reaches the
// installed cluster at its endpoint over HTTPS like a real one.
package cluster
