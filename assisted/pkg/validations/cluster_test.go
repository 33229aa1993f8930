package validations

import (
	"strings"
	"testing"
)

func threeMasters() ClusterInput {
	return ClusterInput{
		OpenshiftVersion: "4.20",
		MachineNetworks:  []string{"192.168.111.0/24"}, ClusterNetworks: []string{"10.128.0.0/14"}, ServiceNetworks: []string{"172.30.0.0/16"},
		ClusterNetworkHostPrefix: 23,
		APIVIPs:                  []string{"192.168.111.5"}, IngressVIPs: []string{"192.168.111.4"},
		BaseDomain: "example.com", NetworkType: "OVNKubernetes", PullSecretSet: true,
		Hosts: []ClusterHost{
			{Role: "master", Status: "known", Approved: true}, {Role: "master", Status: "known", Approved: true},
			{Role: "auto-assign", Status: "known", Approved: true}, {Role: "worker", Status: "known", Approved: true},
		},
		RequiredMasters: 3, RequiredWorkers: 1,
	}
}

func TestClusterThreeMastersWithVIPs(t *testing.T) {
	r := Cluster(threeMasters())
	if !r.Passing() {
		t.Fatalf("not passing: %+v %+v", r.Failing(), r.Pending())
	}
	for id, msg := range map[string]string{
		IDMachineCIDRDefined:     "The Machine Network CIDR is defined.",
		IDClusterCIDRDefined:     "The Cluster Network CIDR is defined.",
		IDServiceCIDRDefined:     "The Service Network CIDR is defined.",
		IDNoCIDRsOverlapping:     "No CIDRS are overlapping.",
		IDNetworkPrefixValid:     "The Cluster Network prefix is valid.",
		IDAPIVIPsDefined:         "API virtual IPs are defined.",
		IDAPIVIPsValid:           "api vips 192.168.111.5 belongs to the Machine CIDR and is not in use.",
		IDIngressVIPsDefined:     "Ingress virtual IPs are defined.",
		IDIngressVIPsValid:       "ingress vips 192.168.111.4 belongs to the Machine CIDR and is not in use.",
		IDDNSDomainDefined:       "The base domain is defined.",
		IDNetworkTypeValid:       "The cluster has a valid network type",
		IDNTPServerConfigured:    "No ntp problems found",
		IDAllHostsReadyToInstall: "All hosts in the cluster are ready to install.",
		IDSufficientMastersCount: "The cluster has the exact amount of dedicated control plane nodes.",
		IDPullSecretSet:          "The pull secret is set.",
	} {
		expect(t, r, id, "success", msg)
	}
	if got := strings.Join(r.Categories(), ","); got != "configuration,hosts-data,network,operators" {
		t.Errorf("categories = %s", got)
	}
}

func TestClusterSNOWithUserManagedNetworking(t *testing.T) {
	in := ClusterInput{
		SNO: true, UserManagedNetworking: true, OpenshiftVersion: "4.22",
		MachineNetworks: []string{"192.168.111.0/24"}, ClusterNetworks: []string{"10.128.0.0/14"}, ServiceNetworks: []string{"172.30.0.0/16"},
		BaseDomain: "example.com", NetworkType: "OVNKubernetes", PullSecretSet: true,
		Hosts:           []ClusterHost{{Role: "master", Status: "known", Approved: true}},
		RequiredMasters: 1,
	}
	r := Cluster(in)
	if !r.Passing() {
		t.Fatalf("not passing: %+v %+v", r.Failing(), r.Pending())
	}
	expect(t, r, IDAPIVIPsDefined, "success", "API virtual IPs are not required: User Managed Networking")
	expect(t, r, IDAPIVIPsValid, "success", "API virtual IPs are not required: User Managed Networking")
	expect(t, r, IDIngressVIPsDefined, "success", "Ingress virtual IPs are not required: User Managed Networking")
	expect(t, r, IDIngressVIPsValid, "success", "Ingress virtual IPs are not required: User Managed Networking")
	expect(t, r, IDMachineCIDRDefined, "success", "The Machine Network CIDR is defined.")

	in.MachineNetworks = nil
	r = Cluster(in)
	expect(t, r, IDMachineCIDRDefined, "failure", "The Machine Network CIDR is undefined; Setting Machine Network CIDR is required for single node cluster")
	expect(t, r, IDNoCIDRsOverlapping, "pending", "At least one of the CIDRs (Machine Network, Cluster Network, Service Network) is undefined.")

	in.Hosts = append(in.Hosts, ClusterHost{Role: "worker", Status: "known"})
	expect(t, Cluster(in), IDSufficientMastersCount, "failure", "Single-node clusters must have a single control plane node and no workers.")

	in.NetworkType = "OpenShiftSDN"
	expect(t, Cluster(in), IDNetworkTypeValid, "failure", "High-availability mode 'None' (SNO) is not supported by OpenShiftSDN; use another network type instead")
}

func TestClusterMultiNodeUserManagedNetworking(t *testing.T) {
	in := threeMasters()
	in.UserManagedNetworking, in.MachineNetworks, in.APIVIPs, in.IngressVIPs = true, nil, nil, nil
	r := Cluster(in)
	expect(t, r, IDMachineCIDRDefined, "success", "No Machine Network CIDR needed: User Managed Networking")
	expect(t, r, IDNoCIDRsOverlapping, "success", "No CIDRS are overlapping.")
	if !r.Passing() {
		t.Errorf("not passing: %+v", r.Failing())
	}
}

func TestClusterFailures(t *testing.T) {
	in := threeMasters()
	in.APIVIPs, in.IngressVIPs = nil, []string{"10.1.1.1"}
	r := Cluster(in)
	expect(t, r, IDAPIVIPsDefined, "failure", "API virtual IPs are undefined and must be provided.")
	expect(t, r, IDAPIVIPsValid, "pending", "API virtual IPs are undefined.")
	expect(t, r, IDIngressVIPsValid, "failure", "ingress vips <10.1.1.1> does not belong to machine-network-cidr <192.168.111.0/24>")

	in = threeMasters()
	in.APIVIPs = []string{"192.168.111.255"}
	expect(t, Cluster(in), IDAPIVIPsValid, "failure", "api vips <192.168.111.255> is the broadcast address of machine-network-cidr <192.168.111.0/24>")

	in = threeMasters()
	in.ServiceNetworks = []string{"10.128.0.0/16"}
	expect(t, Cluster(in), IDNoCIDRsOverlapping, "failure", "CIDRS Overlapping: CIDRS 10.128.0.0/16 and 10.128.0.0/14 overlap (service network and cluster network).")

	in = threeMasters()
	in.Hosts = in.Hosts[:2]
	in.Hosts[1].Status = "insufficient"
	r = Cluster(in)
	expect(t, r, IDSufficientMastersCount, "failure", "The cluster must have exactly 3 dedicated control plane nodes. Add or remove hosts, or change their roles configurations to meet the requirement.")
	expect(t, r, IDAllHostsReadyToInstall, "failure", "The cluster has hosts that are not ready to install.")

	in = threeMasters()
	in.BaseDomain, in.PullSecretSet, in.ClusterNetworks, in.ServiceNetworks = "", false, nil, nil
	r = Cluster(in)
	expect(t, r, IDDNSDomainDefined, "failure", "The base domain is undefined and must be provided.")
	expect(t, r, IDPullSecretSet, "failure", "The pull secret is not set.")
	expect(t, r, IDClusterCIDRDefined, "failure", "The Cluster Network CIDR is undefined.")
	expect(t, r, IDServiceCIDRDefined, "failure", "The Service Network CIDR is undefined.")
	expect(t, r, IDNetworkPrefixValid, "pending", "The Cluster Network CIDR is undefined.")

	in = threeMasters()
	in.MachineNetworks = nil
	expect(t, Cluster(in), IDMachineCIDRDefined, "failure", "The Machine Network CIDR is undefined; the Machine Network CIDR can be defined by setting either the API or Ingress virtual IPs.")
	for i := range in.Hosts {
		in.Hosts[i].Status = "discovering"
	}
	expect(t, Cluster(in), IDMachineCIDRDefined, "pending", "Hosts have not been discovered yet")

	in = threeMasters()
	in.ClusterNetworks, in.ClusterNetworkHostPrefix = []string{"10.128.0.0/23"}, 23
	expect(t, Cluster(in), IDNetworkPrefixValid, "failure", "Cluster network CIDR prefix 23 does not contain enough addresses for 4 hosts each one with 23 prefix (512 addresses)")

	in = threeMasters()
	in.NetworkType, in.ClusterNetworks = "OpenShiftSDN", []string{"fd01::/48"}
	expect(t, Cluster(in), IDNetworkTypeValid, "failure", "The cluster is configured with IPv6 which is not supported by OpenShiftSDN; use OVNKubernetes instead")
	in.NetworkType = "Cilium"
	expect(t, Cluster(in), IDNetworkTypeValid, "success", "The cluster has a valid network type")
}
