package installconfig

import (
	"testing"

	. "github.com/onsi/gomega"
)

// The canaries are secrets no sanitized copy may hold.
const (
	canaryPullSecret = "canary-pull-secret-0"
	canaryBMC1       = "canary-bmc-password-1"
	canaryBMC2       = "canary-bmc-password-2"
	canaryUser       = "canary-bmc-username"
)

const icHead = `apiVersion: v1
baseDomain: example.com
metadata:
  name: demo
controlPlane:
  name: master
  replicas: 1
sshKey: ssh-ed25519 AAAAkeep
metalshift:
  osImage:
    url: http://images/rhcos.raw
    checksum: abc
`

const icHosts = `platform:
  baremetal:
    apiVIPs: [192.0.2.10]
    hosts:
    - name: h0
      role: master
      bootMACAddress: 52:54:00:00:00:01
      bmc:
        address: redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1
        username: ` + canaryUser + `
        password: ` + canaryBMC1 + `
    - name: h1
      bootMACAddress: 52:54:00:00:00:02
      bmc: {address: "ipmi://10.0.0.2", username: admin, password: "` + canaryBMC2 + `"}
`

func TestSanitize(t *testing.T) {
	tests := []struct {
		name string
		doc  string
	}{
		{name: "pull secret as a block scalar", doc: icHead + icHosts + `pullSecret: |
  {"auths":{"quay.io":{"auth":"` + canaryPullSecret + `"}}}
`},
		{name: "pull secret as a folded block scalar", doc: icHead + icHosts + `pullSecret: >-
  {"auths":{"quay.io":
  {"auth":"` + canaryPullSecret + `"}}}
`},
		{name: "pull secret as a quoted flow string", doc: icHead + icHosts + `pullSecret: '{"auths":{"quay.io":{"auth":"` + canaryPullSecret + `"}}}'
`},
		{name: "pull secret as a multi-line flow string", doc: icHead + icHosts + `pullSecret: "{\"auths\":
  {\"quay.io\":{\"auth\":\"` + canaryPullSecret + `\"}}}"
`},
		{name: "pull secret as a plain multi-line scalar", doc: icHead + icHosts + `pullSecret: auths-quay.io
  ` + canaryPullSecret + `
`},
		{name: "pull secret first, indented oddly", doc: `pullSecret:
    '{"auths":{"r":{"auth":"` + canaryPullSecret + `"}}}'
` + icHead + icHosts},
		{name: "JSON document", doc: `{"apiVersion":"v1","baseDomain":"example.com","metadata":{"name":"demo"},"controlPlane":{"name":"master","replicas":1},
"sshKey":"ssh-ed25519 AAAAkeep","metalshift":{"osImage":{"url":"http://images/rhcos.raw","checksum":"abc"}},
"pullSecret":"{\"auths\":{\"r\":{\"auth\":\"` + canaryPullSecret + `\"}}}",
"platform":{"baremetal":{"apiVIPs":["192.0.2.10"],"hosts":[
{"name":"h0","role":"master","bootMACAddress":"52:54:00:00:00:01","bmc":{"address":"redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1","username":"` + canaryUser + `","password":"` + canaryBMC1 + `"}},
{"name":"h1","bootMACAddress":"52:54:00:00:00:02","bmc":{"address":"ipmi://10.0.0.2","username":"admin","password":"` + canaryBMC2 + `"}}]}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			in, err := Parse([]byte(tt.doc))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(in.PullSecret).To(ContainSubstring(canaryPullSecret), "the test document holds the canary")
			has, err := HasSecrets([]byte(tt.doc))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(has).To(BeTrue())

			out, err := Sanitize([]byte(tt.doc))
			g.Expect(err).NotTo(HaveOccurred())
			for _, canary := range []string{canaryPullSecret, canaryBMC1, canaryBMC2, canaryUser, "admin"} {
				g.Expect(string(out)).NotTo(ContainSubstring(canary))
			}
			has, err = HasSecrets(out)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(has).To(BeFalse())

			got, err := Parse(out)
			g.Expect(err).NotTo(HaveOccurred(), "the copy is a valid install-config document")
			g.Expect(got.PullSecret).To(BeEmpty())
			g.Expect(got.Metadata.Name).To(Equal("demo"))
			g.Expect(got.BaseDomain).To(Equal("example.com"))
			g.Expect(got.SSHKey).To(Equal("ssh-ed25519 AAAAkeep"))
			g.Expect(got.ControlPlaneReplicas()).To(BeEquivalentTo(1))
			g.Expect(got.APIVIP()).To(Equal("192.0.2.10"))
			g.Expect(got.Metalshift.OSImage.URL).To(Equal("http://images/rhcos.raw"))
			hosts := got.Platform.BareMetal.Hosts
			g.Expect(hosts).To(HaveLen(2))
			g.Expect(hosts[0].Name).To(Equal("h0"))
			g.Expect(hosts[0].Role).To(Equal(RoleMaster))
			g.Expect(hosts[0].BootMACAddress).To(Equal("52:54:00:00:00:01"))
			g.Expect(hosts[0].BMC).To(Equal(BMC{Address: "redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1"}))
			g.Expect(hosts[1].BMC).To(Equal(BMC{Address: "ipmi://10.0.0.2"}))

			// The input is not changed.
			again, _ := Parse([]byte(tt.doc))
			g.Expect(again.Platform.BareMetal.Hosts[0].BMC.Password).To(Equal(canaryBMC1))
		})
	}
}

func TestSanitizeDropsCredentialsInAddresses(t *testing.T) {
	g := NewWithT(t)
	doc := icHead + `pullSecret: "{}"
platform:
  baremetal:
    apiVIPs: [192.0.2.10]
    hosts:
    - name: h0
      bootMACAddress: 52:54:00:00:00:01
      bmc:
        address: redfish://root:` + canaryBMC1 + `@10.0.0.1/redfish/v1/Systems/1
    - name: h1
      bootMACAddress: 52:54:00:00:00:02
      bmc:
        address: ipmi://root:` + canaryBMC2 + `@10.0.0.2:bad
    - name: h2
      bootMACAddress: 52:54:00:00:00:03
      bmc:
        address: root:` + canaryUser + `@10.0.0.3
`
	has, err := HasSecrets([]byte(doc))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(has).To(BeTrue())
	out, err := Sanitize([]byte(doc))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).NotTo(ContainSubstring(canaryBMC1))
	g.Expect(string(out)).NotTo(ContainSubstring(canaryBMC2))
	g.Expect(string(out)).NotTo(ContainSubstring(canaryUser))
	g.Expect(string(out)).NotTo(ContainSubstring("root"))
	got, err := Parse(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Platform.BareMetal.Hosts[0].BMC.Address).To(Equal("redfish://10.0.0.1/redfish/v1/Systems/1"))
	g.Expect(got.Platform.BareMetal.Hosts[1].BMC.Address).To(Equal("ipmi://10.0.0.2:bad"), "even from an address that does not parse")
	g.Expect(got.Platform.BareMetal.Hosts[2].BMC.Address).To(Equal("10.0.0.3"), "or parses as an opaque URL")
}

func TestSanitizeRefusesWhatItCannotParse(t *testing.T) {
	g := NewWithT(t)
	for _, doc := range []string{"pullSecret: [", "pullSecret: x\nunknownField: 1\n"} {
		_, err := Sanitize([]byte(doc))
		g.Expect(err).To(HaveOccurred(), doc)
		g.Expect(err.Error()).NotTo(ContainSubstring("pullSecret: x"))
	}
}
