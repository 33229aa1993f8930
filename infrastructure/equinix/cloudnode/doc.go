// Package cloudnode is the cloud controller's part for Equinix Metal in an
// installed cluster: it runs against that cluster's API (not the hub's) and
// ties each Node to its device, as the Kubernetes cloud-node and
// cloud-node-lifecycle controllers do for a cloud.
//
// A Node without spec.providerID is matched to the project's device whose
// hostname is the Node's name (among the devices with the cluster's tag,
// when one is given) and gets providerID equinixmetal://<device ID>, set
// once and never changed. Every Node with that prefix gets, from its device,
// its addresses (the device's own: private IPv4 as InternalIP, public IPv4
// and IPv6 as ExternalIP, and the hostname; not the elastic IPs, which move
// between devices), the instance-type, region and zone labels (the plan,
// the metro and the facility), and loses the uninitialized taint the
// kubelet sets with --cloud-provider=external once those are written.
//
// A device that is powered off (inactive, or powering off) gives its Node
// the shutdown taint, removed when the device is active again. A device
// that is gone — not found, or deprovisioning, since a delete cannot be
// undone — has its Node deleted once the Node is not Ready, as upstream
// waits for the kubelet to stop reporting before it believes the cloud. A
// Node of another cloud's providerID is left alone, and so is a Node no
// device matches by hostname. An error of the API (a 5xx, a 429) is never
// taken for a gone device: the Node is looked at again after a pause.
//
// Devices change outside Kubernetes, so every Node is looked at again at
// each resync interval. Run is the whole controller as a process; Setup
// adds it to a manager, as the hub does for each installed cluster
// (package cloudnodes), so that the project's key stays on the hub.
package cloudnode
