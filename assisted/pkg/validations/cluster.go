package validations

import (
	"fmt"
	"net/netip"
	"strings"
)

// ClusterInput is what the cluster validations look at.
type ClusterInput struct {
	SNO                                               bool
	OpenshiftVersion                                  string
	MachineNetworks, ClusterNetworks, ServiceNetworks []string
	// ClusterNetworkHostPrefix is the cluster networks' hostPrefix; 0 when
	// not given (the prefix checks are then skipped).
	ClusterNetworkHostPrefix int64
	APIVIPs, IngressVIPs     []string
	UserManagedNetworking    bool
	BaseDomain               string
	NetworkType              string
	PullSecretSet            bool
	// Hosts are the hosts bound to the cluster.
	Hosts []ClusterHost
	// RequiredMasters and RequiredWorkers are the provisionRequirements;
	// RequiredMasters 0 means the default control plane (3, 1 for SNO).
	RequiredMasters, RequiredWorkers int
}

// ClusterHost is a bound host as the cluster validations see it: its
// effective role and status.
type ClusterHost struct {
	Role     string
	Status   string
	Approved bool
}

// Cluster computes a cluster's validations.
func Cluster(in ClusterInput) Results {
	c := clusterChecks{in: in}
	r := Results{}
	r.put(CategoryNetwork, IDMachineCIDRDefined, c.machineCIDRDefined())
	r.put(CategoryNetwork, IDClusterCIDRDefined, c.clusterCIDRDefined())
	r.put(CategoryNetwork, IDServiceCIDRDefined, c.serviceCIDRDefined())
	r.put(CategoryNetwork, IDNoCIDRsOverlapping, c.noOverlap())
	r.put(CategoryNetwork, IDNetworkPrefixValid, c.prefixValid())
	r.put(CategoryNetwork, IDAPIVIPsDefined, c.vipsDefined("API", in.APIVIPs))
	r.put(CategoryNetwork, IDAPIVIPsValid, c.vipsValid("API", in.APIVIPs))
	r.put(CategoryNetwork, IDIngressVIPsDefined, c.vipsDefined("Ingress", in.IngressVIPs))
	r.put(CategoryNetwork, IDIngressVIPsValid, c.vipsValid("Ingress", in.IngressVIPs))
	r.put(CategoryNetwork, IDDNSDomainDefined, c.dnsDomain())
	r.put(CategoryNetwork, IDNetworkTypeValid, c.networkType())
	r.put(CategoryNetwork, IDNTPServerConfigured, ok("No ntp problems found"))
	r.put(CategoryHostsData, IDAllHostsReadyToInstall, c.allReady())
	r.put(CategoryHostsData, IDSufficientMastersCount, c.mastersCount())
	r.put(CategoryConfiguration, IDPullSecretSet, c.pullSecret())
	r[CategoryOperators] = []Result{}
	return r.sorted()
}

type clusterChecks struct{ in ClusterInput }

// discovered tells whether some host has sent an inventory, judged by its
// status: every status past discovering has one.
func (c clusterChecks) discovered() bool {
	for _, h := range c.in.Hosts {
		switch h.Status {
		case "", "discovering", "discovering-unbound", "binding":
		default:
			return true
		}
	}
	return false
}

func (c clusterChecks) machineCIDRDefined() outcome {
	switch {
	case c.in.UserManagedNetworking && !c.in.SNO:
		return ok("No Machine Network CIDR needed: User Managed Networking")
	case len(c.in.MachineNetworks) > 0:
		return ok("The Machine Network CIDR is defined.")
	case !c.discovered():
		return pending("Hosts have not been discovered yet")
	case c.in.SNO:
		return fail("The Machine Network CIDR is undefined; Setting Machine Network CIDR is required for single node cluster")
	}
	return fail("The Machine Network CIDR is undefined; the Machine Network CIDR can be defined by setting either the API or Ingress virtual IPs.")
}

func (c clusterChecks) clusterCIDRDefined() outcome {
	if len(c.in.ClusterNetworks) > 0 {
		return ok("The Cluster Network CIDR is defined.")
	}
	return fail("The Cluster Network CIDR is undefined.")
}

func (c clusterChecks) serviceCIDRDefined() outcome {
	if len(c.in.ServiceNetworks) > 0 {
		return ok("The Service Network CIDR is defined.")
	}
	return fail("The Service Network CIDR is undefined.")
}

// machineRequired tells whether the machine networks take part in the
// overlap checks.
func (c clusterChecks) machineRequired() bool { return !c.in.UserManagedNetworking || c.in.SNO }

func (c clusterChecks) noOverlap() outcome {
	undefined := len(c.in.ClusterNetworks) == 0 || len(c.in.ServiceNetworks) == 0 ||
		c.machineRequired() && c.machineCIDRDefined().status != StatusSuccess
	if undefined {
		if c.in.UserManagedNetworking && !c.in.SNO {
			return pending("At least one of the CIDRs (Cluster Network, Service Network) is undefined.")
		}
		return pending("At least one of the CIDRs (Machine Network, Cluster Network, Service Network) is undefined.")
	}
	if len(c.in.ClusterNetworks) != len(c.in.ServiceNetworks) {
		return outcome{StatusError, "A mismatch between the number of Cluster and Service networks"}
	}
	type pair struct {
		a, b []string
		what string
	}
	pairs := []pair{{c.in.ServiceNetworks, c.in.ClusterNetworks, "service network and cluster network"}}
	if c.machineRequired() {
		pairs = append([]pair{
			{c.in.MachineNetworks, c.in.ServiceNetworks, "machine network and service network"},
			{c.in.MachineNetworks, c.in.ClusterNetworks, "machine network and cluster network"},
		}, pairs...)
	}
	var errs []string
	for _, p := range pairs {
		for _, a := range p.a {
			for _, b := range p.b {
				over, err := overlap(a, b)
				if err != nil {
					return outcome{StatusError, fmt.Sprintf("Failed to parse CIDR '%s': %v", badCIDR(a, b), err)}
				}
				if over {
					errs = append(errs, fmt.Sprintf("CIDRS %s and %s overlap (%s)", a, b, p.what))
				}
			}
		}
	}
	if len(errs) > 0 {
		return fail(fmt.Sprintf("CIDRS Overlapping: %s.", strings.Join(errs, "\n")))
	}
	return ok("No CIDRS are overlapping.")
}

func badCIDR(a, b string) string {
	if _, err := netip.ParsePrefix(a); err != nil {
		return a
	}
	return b
}

func (c clusterChecks) prefixValid() outcome {
	if len(c.in.ClusterNetworks) == 0 {
		return pending("The Cluster Network CIDR is undefined.")
	}
	hp := c.in.ClusterNetworkHostPrefix
	if hp == 0 {
		return ok("The Cluster Network prefix is valid.")
	}
	if hp < 1 {
		return fail(fmt.Sprintf("Invalid Cluster Network prefix: Host prefix, now %d, must be a positive integer.", hp))
	}
	hosts := max(len(c.in.Hosts), 1)
	for _, cn := range c.in.ClusterNetworks {
		p, err := netip.ParsePrefix(cn)
		if err != nil {
			return outcome{StatusError, fmt.Sprintf("Failed to parse CIDR '%s': %v", cn, err)}
		}
		bits := int64(p.Addr().BitLen())
		if hp > bits {
			return fail(fmt.Sprintf("Invalid Cluster Network prefix: Host prefix, now %d, must be a positive integer.", hp))
		}
		room := max(hp-int64(p.Bits()), 0)
		if room < 63 && int64(hosts) > int64(1)<<room {
			return fail(fmt.Sprintf("Cluster network CIDR prefix %d does not contain enough addresses for %d hosts each one with %d prefix (%d addresses)",
				p.Bits(), hosts, hp, uint64(1)<<min(63, bits-hp)))
		}
	}
	return ok("The Cluster Network prefix is valid.")
}

func (c clusterChecks) vipsDefined(kind string, vips []string) outcome {
	switch {
	case c.in.UserManagedNetworking:
		return ok(fmt.Sprintf("%s virtual IPs are not required: User Managed Networking", kind))
	case c.in.SNO:
		return ok(fmt.Sprintf("%s virtual IPs are not required: SNO", kind))
	case len(vips) > 0:
		return ok(fmt.Sprintf("%s virtual IPs are defined.", kind))
	}
	return fail(fmt.Sprintf("%s virtual IPs are undefined and must be provided.", kind))
}

// vipsValid checks each VIP against the machine network of the same index.
// Whether the address is free is the verify-vips step's business, not
// checked here.
func (c clusterChecks) vipsValid(kind string, vips []string) outcome {
	switch {
	case c.in.UserManagedNetworking:
		return ok(fmt.Sprintf("%s virtual IPs are not required: User Managed Networking", kind))
	case c.in.SNO:
		return ok(fmt.Sprintf("%s virtual IPs are not required: SNO", kind))
	case len(vips) == 0:
		return pending(fmt.Sprintf("%s virtual IPs are undefined.", kind))
	case !c.discovered() || c.machineCIDRDefined().status != StatusSuccess:
		return pending("Hosts have not been discovered yet")
	}
	name := strings.ToLower(kind) + " vips"
	var errs []string
	for i, v := range vips {
		if i >= len(c.in.MachineNetworks) {
			errs = append(errs, fmt.Sprintf("%s <%s> cannot be set if Machine Network CIDR is empty", name, v))
			continue
		}
		cidr := c.in.MachineNetworks[i]
		n, err1 := netip.ParsePrefix(cidr)
		ip, err2 := netip.ParseAddr(v)
		switch {
		case err1 != nil || err2 != nil || !n.Masked().Contains(ip):
			errs = append(errs, fmt.Sprintf("%s <%s> does not belong to machine-network-cidr <%s>", name, v, cidr))
		case isBroadcast(ip, n):
			errs = append(errs, fmt.Sprintf("%s <%s> is the broadcast address of machine-network-cidr <%s>", name, v, cidr))
		}
	}
	if len(errs) > 0 {
		return fail(strings.Join(errs, ";"))
	}
	return ok(fmt.Sprintf("%s %s belongs to the Machine CIDR and is not in use.", name, strings.Join(vips, ", ")))
}

func (c clusterChecks) dnsDomain() outcome {
	if c.in.BaseDomain != "" {
		return ok("The base domain is defined.")
	}
	return fail("The base domain is undefined and must be provided.")
}

// networkType accepts any plugin; OpenShiftSDN has upstream's limits.
func (c clusterChecks) networkType() outcome {
	if c.in.NetworkType == "OpenShiftSDN" {
		for _, cn := range append(append([]string(nil), c.in.ClusterNetworks...), c.in.ServiceNetworks...) {
			if p, err := netip.ParsePrefix(cn); err == nil && p.Addr().Is6() {
				return fail("The cluster is configured with IPv6 which is not supported by OpenShiftSDN; use OVNKubernetes instead")
			}
		}
		if c.in.SNO {
			return fail("High-availability mode 'None' (SNO) is not supported by OpenShiftSDN; use another network type instead")
		}
	}
	return ok("The cluster has a valid network type")
}

func (c clusterChecks) allReady() outcome {
	for _, h := range c.in.Hosts {
		switch h.Status {
		case "known", "preparing-for-installation", "preparing-successful":
		default:
			return fail("The cluster has hosts that are not ready to install.")
		}
	}
	return ok("All hosts in the cluster are ready to install.")
}

// mastersCount counts the control plane: masters, then auto-assign hosts
// while masters are missing; the rest are workers. Arbiters are apart.
func (c clusterChecks) mastersCount() outcome {
	want := c.in.RequiredMasters
	if want == 0 {
		want = 3
		if c.in.SNO {
			want = 1
		}
	}
	masters, workers := 0, 0
	for _, h := range c.in.Hosts {
		switch h.Role {
		case RoleMaster, RoleBootstrap:
			masters++
		case RoleWorker:
			workers++
		}
	}
	for _, h := range c.in.Hosts {
		if h.Role == "" || h.Role == RoleAutoAssign {
			if masters < want {
				masters++
			} else {
				workers++
			}
		}
	}
	if c.in.SNO {
		if masters == 1 && workers == 0 {
			return ok("The cluster has the exact amount of dedicated control plane nodes.")
		}
		return fail("Single-node clusters must have a single control plane node and no workers.")
	}
	if masters == want {
		return ok("The cluster has the exact amount of dedicated control plane nodes.")
	}
	return fail(fmt.Sprintf("The cluster must have exactly %d dedicated control plane nodes. Add or remove hosts, or change their roles configurations to meet the requirement.", want))
}

func (c clusterChecks) pullSecret() outcome {
	if c.in.PullSecretSet {
		return ok("The pull secret is set.")
	}
	return fail("The pull secret is not set.")
}
