package baremetalhost

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// bootMACIndex indexes hosts by their spec.bootMACAddress, in lower case.
const bootMACIndex = "spec.bootMACAddress"

func indexBootMAC(o client.Object) []string {
	if mac := o.(*metal3v1.BareMetalHost).Spec.BootMACAddress; mac != "" {
		return []string{strings.ToLower(mac)}
	}
	return nil
}

// firstWithBootMAC returns, of hosts that have host's boot MAC address
// (host among them or not), the one that was there first, when it is not
// host: the oldest creationTimestamp wins, then namespace and name.
func firstWithBootMAC(host *metal3v1.BareMetalHost, hosts []metal3v1.BareMetalHost) *metal3v1.BareMetalHost {
	first := host
	for i := range hosts {
		h := &hosts[i]
		if h.UID == host.UID || !strings.EqualFold(h.Spec.BootMACAddress, host.Spec.BootMACAddress) {
			continue
		}
		if older(h, first) {
			first = h
		}
	}
	if first == host {
		return nil
	}
	return first
}

func older(a, b *metal3v1.BareMetalHost) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// checkBootMAC refuses to boot a host whose spec.bootMACAddress another
// host had first: the deploy server hands a network-booting machine the
// boot of the host with its MAC, and the lookup the host with one of its
// MACs, so two hosts with one MAC could get each other's. A hub without
// the admission webhook's check is safe too.
func (r *Reconciler) checkBootMAC(ctx context.Context, s *hostScope, errType metal3v1.ErrorType) actionResult {
	mac := s.host.Spec.BootMACAddress
	if mac == "" || r.Client == nil {
		return nil
	}
	hosts := &metal3v1.BareMetalHostList{}
	if err := r.Client.List(ctx, hosts, client.MatchingFields{bootMACIndex: strings.ToLower(mac)}); err != nil {
		return fail(errType, fmt.Sprintf("Listing the hosts with boot MAC %s failed: %v", mac, err))
	}
	first := firstWithBootMAC(s.host, hosts.Items)
	if first == nil {
		return nil
	}
	other := "another BareMetalHost"
	if first.Namespace == s.host.Namespace {
		other = "BareMetalHost " + first.Name
	}
	return fail(errType, fmt.Sprintf("spec.bootMACAddress %s is also the boot MAC address of %s, which was there first: "+
		"this host is not booted until its spec.bootMACAddress is unique", mac, other))
}
