package installconfig

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
)

const equinixConfig = `apiVersion: v1
baseDomain: lab.example.com
metadata: {name: demo}
controlPlane: {name: master, replicas: 3}
compute: [{name: worker, replicas: 2}]
platform:
  equinixMetal:
    projectID: 3d5e7f90-1a2b-4c3d-8e4f-5a6b7c8d9e0f
    metro: sv
    apiURL: http://127.0.0.1:7080/metal/v1
    apiKeyFile: /home/me/.metal-key
    defaultMachinePlatform: {plan: c3.small.x86, hardwareReservationID: next-available, tags: [team=platform]}
    dns: {server: 127.0.0.1:5353, zone: example.com, tsigKeyFile: /home/me/tsig.key}
pullSecret: '{"auths":{}}'
metalshift:
  osImage: {url: http://images/rhcos.raw, checksum: abc}
`

// TestEquinixMetalPlatform: the platform parses and validates, its VIPs
// are the install's API and ingress addresses once set, each problem
// names its field, and the copy that leaves the installer keeps no path
// of a key file.
func TestEquinixMetalPlatform(t *testing.T) {
	g := NewWithT(t)
	ic, err := Parse([]byte(equinixConfig))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ic.Validate()).To(BeEmpty())
	g.Expect(ic.APIVIP()).To(BeEmpty(), "reserved by create manifests")
	ic.Platform.EquinixMetal.APIVIP, ic.Platform.EquinixMetal.IngressVIP = "127.66.0.0", "127.66.0.1"
	g.Expect(ic.Validate()).To(BeEmpty())
	g.Expect(ic.APIVIP()).To(Equal("127.66.0.0"))
	g.Expect(ic.IngressVIP()).To(Equal("127.66.0.1"))

	for _, tt := range []struct {
		name, field, detail string
		edit                func(e *EquinixMetal)
	}{
		{"project", "platform.equinixMetal.projectID", "must be the project's UUID", func(e *EquinixMetal) { e.ProjectID = "my-project" }},
		{"no place", "platform.equinixMetal.metro", "one of metro or facility", func(e *EquinixMetal) { e.Metro = "" }},
		{"both places", "platform.equinixMetal.facility", "exclusive", func(e *EquinixMetal) { e.Facility = "sv15" }},
		{"api URL", "platform.equinixMetal.apiURL", "without a user or password", func(e *EquinixMetal) { e.APIURL = "https://u:canary@api.example" }},
		{"plan", "platform.equinixMetal.defaultMachinePlatform.plan", "the device plan", func(e *EquinixMetal) { e.DefaultMachinePlatform.Plan = "" }},
		{"vip", "platform.equinixMetal.apiVIP", "IPv4", func(e *EquinixMetal) { e.APIVIP, e.IngressVIP = "2001:db8::1", "127.66.0.1" }},
		{"one vip", "platform.equinixMetal.ingressVIP", "set together", func(e *EquinixMetal) { e.APIVIP = "127.66.0.0" }},
		{"zone", "platform.equinixMetal.dns.zone", "must hold baseDomain lab.example.com", func(e *EquinixMetal) { e.DNS.Zone = "example.org" }},
		{"key file", "platform.equinixMetal.dns.tsigKeyFile", "BIND key file", func(e *EquinixMetal) { e.DNS.TSIGKeyFile = "" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ic, err := Parse([]byte(equinixConfig))
			g.Expect(err).NotTo(HaveOccurred())
			tt.edit(ic.Platform.EquinixMetal)
			errs := ic.Validate()
			g.Expect(errs).To(HaveLen(1), "%v", errs)
			g.Expect(errs[0].Field).To(Equal(tt.field))
			g.Expect(errs[0].Error()).To(ContainSubstring(tt.detail))
			g.Expect(errs[0].Error()).NotTo(ContainSubstring("canary"))
		})
	}

	both, err := Parse([]byte(equinixConfig))
	g.Expect(err).NotTo(HaveOccurred())
	both.Platform.BareMetal = &BareMetal{APIVIPs: []string{"192.0.2.1"}}
	both.ControlPlane.Replicas = ptr.To[int32](1)
	g.Expect(both.Validate().ToAggregate().Error()).To(ContainSubstring("platform.equinixMetal: Forbidden: one platform"))

	clean, err := Sanitize([]byte(equinixConfig))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(clean)).NotTo(ContainSubstring("/home/me"))
	g.Expect(strings.Contains(string(clean), "c3.small.x86")).To(BeTrue())
}
