package webhooks_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

const project = "3d5e7f90-1a2b-4c3d-8e4f-5a6b7c8d9e0f"

func validCluster(ns, name string) *infrav1.EquinixMetalCluster {
	return &infrav1.EquinixMetalCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.EquinixMetalClusterSpec{
			ProjectID:      project,
			Metro:          "sv",
			CredentialsRef: infrav1.SecretReference{Name: "equinix-credentials"},
			APIURL:         "http://127.0.0.1:8090/metal/v1",
			DNS: &infrav1.EquinixMetalDNS{Server: "10.0.0.53:53", Zone: "example.com", BaseDomain: "lab.example.com.",
				TSIGKeyRef: infrav1.SecretReference{Name: "tsig"}},
		},
	}
}

// refusedCreate expects the API server to refuse obj as Invalid with a
// message containing each of want, and no canary.
func refusedCreate(t *testing.T, obj client.Object, want ...string) {
	t.Helper()
	g := NewWithT(t)
	err := env.Client.Create(context.Background(), obj)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	for _, w := range want {
		g.Expect(err.Error()).To(ContainSubstring(w))
	}
	g.Expect(err.Error()).NotTo(ContainSubstring("canary"))
}

// TestClusterCreate: a valid cluster is accepted; each refusal, by the
// schema (CEL, patterns) or the webhook, names its field.
func TestClusterCreate(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, validCluster(ns, "ok"))).To(Succeed())
	facility := validCluster(ns, "by-facility")
	facility.Spec.Metro, facility.Spec.Facility, facility.Spec.DNS, facility.Spec.APIURL = "", "da11", nil, ""
	g.Expect(env.Client.Create(ctx, facility)).To(Succeed())

	for _, tt := range []struct {
		name string
		edit func(c *infrav1.EquinixMetalCluster)
		want []string
	}{
		{"neither", func(c *infrav1.EquinixMetalCluster) { c.Spec.Metro = "" }, []string{"spec: Invalid value", "exactly one of metro or facility is required"}},
		{"both", func(c *infrav1.EquinixMetalCluster) { c.Spec.Facility = "da11" }, []string{"exactly one of metro or facility is required"}},
		{"project", func(c *infrav1.EquinixMetalCluster) { c.Spec.ProjectID = "my-project" }, []string{"spec.projectID", "should match"}},
		{"no-project", func(c *infrav1.EquinixMetalCluster) { c.Spec.ProjectID = "" }, []string{"spec.projectID"}},
		{"metro", func(c *infrav1.EquinixMetalCluster) { c.Spec.Metro = "Silicon Valley" }, []string{"spec.metro", "should match"}},
		{"no-credentials", func(c *infrav1.EquinixMetalCluster) { c.Spec.CredentialsRef.Name = "" }, []string{"spec.credentialsRef.name"}},
		{"credentials-name", func(c *infrav1.EquinixMetalCluster) { c.Spec.CredentialsRef.Name = "Equinix_Key" },
			[]string{`spec.credentialsRef.name: Invalid value: "Equinix_Key"`}},
		{"api-url-scheme", func(c *infrav1.EquinixMetalCluster) { c.Spec.APIURL = "ftp://api.example.com" },
			[]string{`spec.apiURL: Invalid value: "ftp://api.example.com": must be an http or https URL`}},
		{"api-url-host", func(c *infrav1.EquinixMetalCluster) { c.Spec.APIURL = "https:///metal/v1" },
			[]string{`spec.apiURL: Invalid value: "https:///metal/v1": must name a host`}},
		{"api-url-scheme-password", func(c *infrav1.EquinixMetalCluster) { c.Spec.APIURL = "ftp://user:canary-key@api.example.com" },
			[]string{`spec.apiURL: Invalid value: "<redacted>": must not carry a user name or password`}},
		{"api-url-unparsable", func(c *infrav1.EquinixMetalCluster) { c.Spec.APIURL = "https://user:canary%zz@api.example.com" },
			[]string{`spec.apiURL: Invalid value: "<redacted>": is not a URL`}},
		{"api-url-password", func(c *infrav1.EquinixMetalCluster) {
			c.Spec.APIURL = "https://user:canary-key@api.example.com/metal/v1"
		},
			[]string{`spec.apiURL: Invalid value: "<redacted>": must not carry a user name or password`}},
		{"dns-server", func(c *infrav1.EquinixMetalCluster) { c.Spec.DNS.Server = "ns1.example.com:99999" },
			[]string{`spec.dns.server: Invalid value: "ns1.example.com:99999": has an invalid port`}},
		{"dns-server-name", func(c *infrav1.EquinixMetalCluster) { c.Spec.DNS.Server = "not a host" },
			[]string{`spec.dns.server: Invalid value: "not a host": must be a host name or IP address`}},
		{"dns-zone", func(c *infrav1.EquinixMetalCluster) { c.Spec.DNS.Zone = "example..com" },
			[]string{`spec.dns.zone: Invalid value: "example..com": must be a DNS name`}},
		{"dns-base-domain", func(c *infrav1.EquinixMetalCluster) { c.Spec.DNS.BaseDomain = "example.org" },
			[]string{`spec.dns.baseDomain: Invalid value: "example.org": must be the zone example.com or a domain within it`}},
		{"dns-base-domain-suffix", func(c *infrav1.EquinixMetalCluster) { c.Spec.DNS.BaseDomain = "notexample.com" },
			[]string{`spec.dns.baseDomain: Invalid value: "notexample.com": must be the zone example.com`}},
		{"tsig-name", func(c *infrav1.EquinixMetalCluster) { c.Spec.DNS.TSIGKeyRef.Name = "TSIG" },
			[]string{`spec.dns.tsigKeyRef.name: Invalid value: "TSIG"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := validCluster(ns, tt.name)
			tt.edit(c)
			refusedCreate(t, c, tt.want...)
		})
	}
}

// TestClusterUpdate: the project, credentials and location are fixed, the
// endpoint once set; the rest may change.
func TestClusterUpdate(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	g := NewWithT(t)
	c := validCluster(ns, "c")
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	update := func(edit func(c *infrav1.EquinixMetalCluster)) error {
		cur := &infrav1.EquinixMetalCluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
		edit(cur)
		return env.Client.Update(ctx, cur)
	}
	for _, tt := range []struct {
		name string
		edit func(c *infrav1.EquinixMetalCluster)
		want []string
	}{
		{"project", func(c *infrav1.EquinixMetalCluster) { c.Spec.ProjectID = "4d5e7f90-1a2b-4c3d-8e4f-5a6b7c8d9e0f" },
			[]string{`spec.projectID: Invalid value: "4d5e7f90-1a2b-4c3d-8e4f-5a6b7c8d9e0f": field is immutable`}},
		{"credentials", func(c *infrav1.EquinixMetalCluster) { c.Spec.CredentialsRef.Name = "other" },
			[]string{`spec.credentialsRef.name: Invalid value: "other": field is immutable`}},
		{"metro", func(c *infrav1.EquinixMetalCluster) { c.Spec.Metro = "da" },
			[]string{`spec.metro: Invalid value: "da": field is immutable`}},
		{"metro-to-facility", func(c *infrav1.EquinixMetalCluster) { c.Spec.Metro, c.Spec.Facility = "", "da11" },
			[]string{`spec.metro: Invalid value: "": field is immutable`, `spec.facility: Invalid value: "da11": field is immutable`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := update(tt.edit)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}

	// The endpoint may be set once (by the provider), the API URL and the
	// DNS server changed, labels added.
	g.Expect(update(func(c *infrav1.EquinixMetalCluster) {
		c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "147.75.0.10", Port: 6443}
		c.Spec.APIURL = ""
		c.Spec.DNS.Server = "ns1.example.com"
		c.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "c"}
	})).To(Succeed())
	err := update(func(c *infrav1.EquinixMetalCluster) { c.Spec.ControlPlaneEndpoint.Host = "147.75.0.11" })
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.controlPlaneEndpoint: Invalid value"))
	g.Expect(err.Error()).To(ContainSubstring("cannot change once set"))
}

func validMachine(ns, name string) *infrav1.EquinixMetalMachine {
	return &infrav1.EquinixMetalMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.EquinixMetalMachineSpec{
			Plan:    "c3.small.x86",
			Image:   &infrav1.Image{URL: "http://images.example.com/rhcos.raw", Checksum: "0123abcd", ChecksumType: "sha256"},
			Tags:    []string{"team:infra"},
			SSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly admin@example.com"},
		},
	}
}

// TestMachineCreate: defaults are applied; each refusal names its field.
func TestMachineCreate(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	g := NewWithT(t)
	m := validMachine(ns, "ok")
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	g.Expect(m.Spec.OperatingSystem).To(Equal(infrav1.CustomIPXE))
	g.Expect(m.Spec.BillingCycle).To(Equal("hourly"))

	for name, edit := range map[string]func(m *infrav1.EquinixMetalMachine){
		"reservations":   func(m *infrav1.EquinixMetalMachine) { m.Spec.HardwareReservationID = resA + ", " + resB },
		"next-available": func(m *infrav1.EquinixMetalMachine) { m.Spec.HardwareReservationID = "next-available" },
		"one-reservation": func(m *infrav1.EquinixMetalMachine) {
			m.Spec.HardwareReservationID, m.Spec.Metro = resA, "da"
		},
		"ipxe-url": func(m *infrav1.EquinixMetalMachine) {
			m.Spec.IPXEScriptURL, m.Spec.Facility, m.Spec.BillingCycle = "https://boot.example.com/ipxe?machine=a", "da11", "monthly"
		},
		"other-os": func(m *infrav1.EquinixMetalMachine) { m.Spec.OperatingSystem, m.Spec.Image = "ubuntu_24_04", nil },
		"own-script": func(m *infrav1.EquinixMetalMachine) {
			m.Spec.IPXEScriptURL, m.Spec.Image = "https://boot.example.com/own.ipxe", nil
		},
	} {
		m := validMachine(ns, name)
		edit(m)
		g.Expect(env.Client.Create(ctx, m)).To(Succeed(), name)
	}

	for _, tt := range []struct {
		name string
		edit func(m *infrav1.EquinixMetalMachine)
		want []string
	}{
		{"no-plan", func(m *infrav1.EquinixMetalMachine) { m.Spec.Plan = "" }, []string{"spec.plan"}},
		{"both", func(m *infrav1.EquinixMetalMachine) { m.Spec.Metro, m.Spec.Facility = "sv", "da11" }, []string{"metro and facility are exclusive"}},
		{"ipxe-os", func(m *infrav1.EquinixMetalMachine) {
			m.Spec.OperatingSystem, m.Spec.IPXEScriptURL = "ubuntu_24_04", "https://boot.example.com/ipxe"
		}, []string{"ipxeScriptURL needs operatingSystem custom_ipxe"}},
		{"ipxe-password", func(m *infrav1.EquinixMetalMachine) {
			m.Spec.IPXEScriptURL = "https://u:canary-pass@boot.example.com/ipxe"
		},
			[]string{`spec.ipxeScriptURL: Invalid value: "<redacted>": must not carry a user name or password`}},
		{"billing", func(m *infrav1.EquinixMetalMachine) { m.Spec.BillingCycle = "weekly" }, []string{"spec.billingCycle", "Unsupported value"}},
		{"provider-id", func(m *infrav1.EquinixMetalMachine) { m.Spec.ProviderID = "packet://" + resA }, []string{"spec.providerID", "should match"}},
		{"reservation-any", func(m *infrav1.EquinixMetalMachine) { m.Spec.HardwareReservationID = "any" },
			[]string{`spec.hardwareReservationID: Invalid value: "any": "any" is not a hardware reservation ID`}},
		{"reservation-list", func(m *infrav1.EquinixMetalMachine) { m.Spec.HardwareReservationID = resA + ",next-available" },
			[]string{"spec.hardwareReservationID: Invalid value", "next-available stands alone"}},
		{"reservation-twice", func(m *infrav1.EquinixMetalMachine) { m.Spec.HardwareReservationID = resA + "," + resA },
			[]string{"spec.hardwareReservationID: Invalid value", "twice"}},
		{"empty-tag", func(m *infrav1.EquinixMetalMachine) { m.Spec.Tags = []string{""} }, []string{"spec.tags[0]"}},
		{"no-image", func(m *infrav1.EquinixMetalMachine) { m.Spec.Image = nil }, []string{"spec.image: Required value", "writes this OS image"}},
		{"image-password", func(m *infrav1.EquinixMetalMachine) {
			m.Spec.Image.URL = "https://u:canary-pass@images.example.com/rhcos.raw"
		},
			[]string{`spec.image.url: Invalid value: "<redacted>": must not carry a user name or password`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := validMachine(ns, tt.name)
			tt.edit(m)
			refusedCreate(t, m, tt.want...)
		})
	}
}

// TestMachineUpdate: tags change and providerID is set once; every other
// field of the spec is fixed.
func TestMachineUpdate(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	g := NewWithT(t)
	m := validMachine(ns, "m")
	m.Spec.HardwareReservationID = resA
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	update := func(edit func(m *infrav1.EquinixMetalMachine)) error {
		cur := &infrav1.EquinixMetalMachine{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), cur)).To(Succeed())
		edit(cur)
		return env.Client.Update(ctx, cur)
	}
	g.Expect(update(func(m *infrav1.EquinixMetalMachine) {
		m.Spec.Tags = append(m.Spec.Tags, "cost-center:42")
		m.Spec.ProviderID = infrav1.EquinixMetalProviderIDPrefix + resB
	})).To(Succeed())
	g.Expect(update(func(m *infrav1.EquinixMetalMachine) { m.Spec.Tags = nil })).To(Succeed())

	for _, tt := range []struct {
		name string
		edit func(m *infrav1.EquinixMetalMachine)
		want []string
	}{
		{"provider-id", func(m *infrav1.EquinixMetalMachine) { m.Spec.ProviderID = infrav1.EquinixMetalProviderIDPrefix + resA },
			[]string{`spec.providerID: Invalid value: "equinixmetal://` + resA + `": cannot change once set`}},
		{"plan", func(m *infrav1.EquinixMetalMachine) { m.Spec.Plan = "m3.large.x86" },
			[]string{`spec.plan: Invalid value: "m3.large.x86": field is immutable`}},
		{"metro", func(m *infrav1.EquinixMetalMachine) { m.Spec.Metro = "ny" },
			[]string{`spec.metro: Invalid value: "ny": field is immutable`}},
		{"os", func(m *infrav1.EquinixMetalMachine) { m.Spec.OperatingSystem = "ubuntu_24_04" },
			[]string{`spec.operatingSystem: Invalid value: "ubuntu_24_04": field is immutable`}},
		{"reservation", func(m *infrav1.EquinixMetalMachine) { m.Spec.HardwareReservationID = "next-available" },
			[]string{`spec.hardwareReservationID: Invalid value: "next-available": field is immutable`}},
		{"image", func(m *infrav1.EquinixMetalMachine) { m.Spec.Image.Checksum = "4567" },
			[]string{"spec: Forbidden: is immutable but for providerID and tags"}},
		{"ssh-keys", func(m *infrav1.EquinixMetalMachine) { m.Spec.SSHKeys = nil },
			[]string{"spec.sshKeys: Forbidden: field is immutable"}},
		{"ipxe-url", func(m *infrav1.EquinixMetalMachine) {
			m.Spec.IPXEScriptURL = "https://boot.example.com/ipxe?token=canary"
		},
			[]string{`spec.ipxeScriptURL: Invalid value: "<redacted>": field is immutable`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := update(tt.edit)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("canary"))
		})
	}

	// The status is the provider's, written through its subresource,
	// which the webhook does not judge.
	cur := &infrav1.EquinixMetalMachine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), cur)).To(Succeed())
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Status.DeviceID, cur.Status.InstanceState = resB, "queued"
	g.Expect(env.Client.Status().Patch(ctx, cur, patch)).To(Succeed())
}

func validTemplate(ns, name string) *infrav1.EquinixMetalMachineTemplate {
	return &infrav1.EquinixMetalMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.EquinixMetalMachineTemplateSpec{Template: infrav1.EquinixMetalMachineTemplateResource{
			Spec: infrav1.EquinixMetalMachineSpec{Plan: "c3.small.x86", Metro: "sv", HardwareReservationID: "next-available",
				Image: &infrav1.Image{URL: "http://images.example.com/rhcos.raw", Checksum: "0123abcd"}},
		}},
	}
}

// TestTemplate: a template's machine spec is checked and defaulted as a
// machine's, with the template's paths, and its spec is fixed.
func TestTemplate(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	g := NewWithT(t)
	tmpl := validTemplate(ns, "t")
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
	g.Expect(tmpl.Spec.Template.Spec.OperatingSystem).To(Equal(infrav1.CustomIPXE))

	bad := validTemplate(ns, "bad")
	bad.Spec.Template.Spec.HardwareReservationID = "first"
	refusedCreate(t, bad, `spec.template.spec.hardwareReservationID: Invalid value: "first"`)
	both := validTemplate(ns, "both")
	both.Spec.Template.Spec.Facility = "da11"
	refusedCreate(t, both, "spec.template.spec: Invalid value", "metro and facility are exclusive")

	update := func(edit func(t *infrav1.EquinixMetalMachineTemplate)) error {
		cur := &infrav1.EquinixMetalMachineTemplate{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), cur)).To(Succeed())
		edit(cur)
		return env.Client.Update(ctx, cur)
	}
	err := update(func(t *infrav1.EquinixMetalMachineTemplate) { t.Spec.Template.Spec.Tags = []string{"new"} })
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.template.spec: Forbidden: a template's spec is immutable"))
	err = update(func(t *infrav1.EquinixMetalMachineTemplate) {
		t.Spec.Template.ObjectMeta.Labels = map[string]string{"pool": "a"}
	})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.template.metadata: Forbidden"))
	g.Expect(update(func(t *infrav1.EquinixMetalMachineTemplate) { t.Labels = map[string]string{"owner": "team"} })).To(Succeed())
}
