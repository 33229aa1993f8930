package installconfig

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
)

const fullInstallConfig = `apiVersion: v1
baseDomain: example.com
metadata:
  name: demo
controlPlane:
  name: master
  replicas: 3
compute:
- name: worker
  replicas: 2
networking:
  machineNetwork:
  - cidr: 192.0.2.0/24
  clusterNetwork:
  - cidr: 10.128.0.0/14
    hostPrefix: 23
  serviceNetwork: [172.30.0.0/16]
  networkType: OVNKubernetes
platform:
  baremetal:
    apiVIPs: [192.0.2.10]
    ingressVIPs: [192.0.2.11]
    hosts:
    - name: master-0
      role: master
      bootMACAddress: 52:54:00:00:00:01
      bootMode: UEFI
      bmc:
        address: redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1
        username: admin
        password: "s3cret: with a colon"
        disableCertificateVerification: true
      rootDeviceHints:
        deviceName: /dev/sda
        minSizeGigabytes: 120
        rotational: false
pullSecret: '{"auths":{}}'
sshKey: ssh-ed25519 AAAA
metalshift:
  version: 4.19.3
  kubernetesVersion: v1.32.6
  osImage:
    url: http://images/rhcos.raw
    checksum: abc
    checksumType: sha256
`

// TestParse: every field a person writes lands where metalshift reads it.
func TestParse(t *testing.T) {
	g := NewWithT(t)
	ic, err := Parse([]byte(fullInstallConfig))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ic).To(Equal(&InstallConfig{
		APIVersion:   "v1",
		BaseDomain:   "example.com",
		Metadata:     Metadata{Name: "demo"},
		ControlPlane: MachinePool{Name: "master", Replicas: ptr.To[int32](3)},
		Compute:      []MachinePool{{Name: "worker", Replicas: ptr.To[int32](2)}},
		Networking: &Networking{
			MachineNetwork: []CIDR{{CIDR: "192.0.2.0/24"}},
			ClusterNetwork: []CIDRs{{CIDR: "10.128.0.0/14", HostPrefix: 23}},
			ServiceNetwork: []string{"172.30.0.0/16"},
			NetworkType:    "OVNKubernetes",
		},
		Platform: Platform{BareMetal: &BareMetal{
			APIVIPs: []string{"192.0.2.10"}, IngressVIPs: []string{"192.0.2.11"},
			Hosts: []Host{{
				Name: "master-0", Role: "master", BootMACAddress: "52:54:00:00:00:01", BootMode: "UEFI",
				BMC: BMC{Address: "redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1", Username: "admin", Password: "s3cret: with a colon",
					DisableCertificateVerification: true},
				RootDeviceHints: &RootDeviceHints{DeviceName: "/dev/sda", MinSizeGigabytes: 120, Rotational: ptr.To(false)},
			}},
		}},
		PullSecret: `{"auths":{}}`,
		SSHKey:     "ssh-ed25519 AAAA",
		Metalshift: &Metalshift{Version: "4.19.3", KubernetesVersion: "v1.32.6",
			OSImage: OSImage{URL: "http://images/rhcos.raw", Checksum: "abc", ChecksumType: "sha256"}},
	}))
	g.Expect(ic.Version()).To(Equal("4.19.3"))
	g.Expect(ic.KubernetesVersion()).To(Equal("v1.32.6"))
	g.Expect(ic.ControlPlaneReplicas()).To(BeEquivalentTo(3))
	g.Expect(ic.WorkerReplicas()).To(BeEquivalentTo(2))
	g.Expect(ic.APIVIP()).To(Equal("192.0.2.10"))
	g.Expect(ic.APIHost()).To(Equal("api.demo.example.com"))
	g.Expect(ic.APIInternalHost()).To(Equal("api-int.demo.example.com"))
}

// TestParseDefaults: what an install-config leaves out reads as
// openshift-install's defaults.
func TestParseDefaults(t *testing.T) {
	g := NewWithT(t)
	ic, err := Parse([]byte("apiVersion: v1\nmetadata: {name: demo}\ncompute:\n- name: worker\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ic.ControlPlaneReplicas()).To(BeEquivalentTo(3))
	g.Expect(ic.WorkerReplicas()).To(BeEquivalentTo(3), "a compute pool without replicas has 3")
	g.Expect(ic.Version()).To(Equal(DefaultVersion))
	g.Expect(ic.KubernetesVersion()).To(Equal(DefaultKubernetesVersion))

	// Names match regardless of case, as openshift-install reads them.
	ic, err = Parse([]byte("apiVersion: v1\nBaseDomain: example.com\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ic.BaseDomain).To(Equal("example.com"))

	// JSON is YAML too.
	ic, err = Parse([]byte(`{"apiVersion":"v1","metadata":{"name":"demo"},"controlPlane":{"replicas":1}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ic.Metadata.Name).To(Equal("demo"))
	g.Expect(ic.ControlPlaneReplicas()).To(BeEquivalentTo(1))
}

// TestParseErrors: a typo, a wrong type or broken YAML is an error that
// names the field, with its path, or the line.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"misspelt top-level field", "apiVersion: v1\nbaseDomian: example.com\n",
			[]string{"reading install-config", `unknown field "baseDomian"`}},
		{"misspelt nested field", "platform:\n  baremetal:\n    hosts:\n    - name: h0\n      bmc: {address: ipmi://h, pasword: x}\n",
			[]string{"reading install-config", `unknown field "platform.baremetal.hosts[0].bmc.pasword"`}},
		{"a field of another platform", "platform:\n  aws: {region: us-east-1}\n",
			[]string{`unknown field "platform.aws"`}},
		{"replicas not a number", "controlPlane:\n  replicas: three\n",
			[]string{"reading install-config", "controlPlane.replicas", "int32"}},
		{"hosts not a list", "platform:\n  baremetal:\n    hosts: h0\n",
			[]string{"platform.baremetal.hosts"}},
		{"broken YAML", "metadata:\n  name: [demo\n",
			[]string{"install-config is not YAML", "line 2"}},
		{"tab indentation", "metadata:\n\tname: demo\n",
			[]string{"install-config is not YAML"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ic, err := Parse([]byte(tt.doc))
			g.Expect(ic).To(BeNil())
			g.Expect(err).To(HaveOccurred())
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

// TestParseEmpty: an empty file parses to nothing, and Validate then says
// what is required.
func TestParseEmpty(t *testing.T) {
	g := NewWithT(t)
	ic, err := Parse(nil)
	g.Expect(err).NotTo(HaveOccurred())
	errs := ic.Validate()
	g.Expect(errs.ToAggregate()).To(MatchError(And(ContainSubstring("apiVersion"), ContainSubstring("metadata.name"), ContainSubstring("pullSecret"))))
}

func TestParseFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "install-config.yaml")
	g.Expect(os.WriteFile(p, []byte(fullInstallConfig), 0o600)).To(Succeed())
	ic, err := ParseFile(p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ic.Metadata.Name).To(Equal("demo"))

	_, err = ParseFile(filepath.Join(dir, "missing.yaml"))
	g.Expect(err).To(MatchError(ContainSubstring(filepath.Join(dir, "missing.yaml"))))
	g.Expect(os.IsNotExist(err)).To(BeTrue())
}
