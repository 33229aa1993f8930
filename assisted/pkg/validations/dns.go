package validations

import "fmt"

// appsProbe is the name under *.apps the host resolves to check the
// wildcard record (upstream's).
const appsProbe = "console-openshift-console"

// DNSDomains returns the names a host resolves for the DNS validations of
// a cluster, by validation ID; the keys of HostInput.DomainsResolved.
func DNSDomains(clusterName, baseDomain string) map[string]string {
	d := clusterName + "." + baseDomain
	return map[string]string{
		IDAPIDomainResolved:    "api." + d,
		IDAPIIntDomainResolved: "api-int." + d,
		IDAppsDomainResolved:   appsProbe + ".apps." + d,
	}
}

type dnsCheck struct {
	id string
	outcome
}

// dnsChecks are the domain-resolution validations. Managed networking and
// a day-1 single node (whose node serves its own records) need none.
func (h hostChecks) dnsChecks() []dnsCheck {
	domains := DNSDomains(h.in.ClusterName, h.in.BaseDomain)
	d := h.in.ClusterName + "." + h.in.BaseDomain
	list := []struct{ id, shown, target string }{
		{IDAPIDomainResolved, "api." + d, "API load balancer"},
		{IDAPIIntDomainResolved, "api-int." + d, "internal API load balancer"},
		{IDAppsDomainResolved, "*.apps." + d, "application ingress"},
	}
	out := make([]dnsCheck, 0, len(list))
	for _, c := range list {
		out = append(out, dnsCheck{c.id, h.dnsCheck(domains[c.id], c.shown, c.target)})
	}
	return out
}

func (h hostChecks) dnsCheck(probe, shown, target string) outcome {
	shownOrTarget := shown
	if h.in.BaseDomain == "" {
		shownOrTarget = target
	}
	success := ok(fmt.Sprintf("Domain name resolution for the %s domain was successful or not required", shownOrTarget))
	if !h.in.UserManagedNetworking || h.in.SNO && !h.in.Day2 {
		return success
	}
	if h.in.BaseDomain == "" {
		return outcome{StatusError, fmt.Sprintf("DNS validation for the %s domain cannot be completed because the cluster does not have base_dns_domain set. Please update the cluster with the correct base_dns_domain", target)}
	}
	resolved, reported := h.in.DomainsResolved[probe]
	switch {
	case h.in.DomainsResolved == nil || !reported:
		return pending(fmt.Sprintf("DNS validation for the %s domain cannot be completed at the moment. This could be due to other validations", shownOrTarget))
	case resolved:
		return success
	}
	return fail(fmt.Sprintf("Couldn't resolve domain name %s on the host. To continue installation, create the necessary DNS entries to resolve this domain name to your cluster's %s IP address", shown, target))
}
