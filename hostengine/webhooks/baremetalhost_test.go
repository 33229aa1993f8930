package webhooks

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
)

// validHost is a host every rule accepts.
func validHost() *metal3v1.BareMetalHost {
	return &metal3v1.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Name: "h0", Namespace: "a"},
		Spec: metal3v1.BareMetalHostSpec{
			BMC:            metal3v1.BMCDetails{Address: "redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1", CredentialsName: "h0-bmc"},
			BootMACAddress: "52:54:00:00:00:01",
			Image:          &metal3v1.Image{URL: "http://images/rhcos.raw", Checksum: "abc", ChecksumType: metal3v1.SHA256, DiskFormat: ptr.To("raw")},
			UserData:       &corev1.SecretReference{Name: "ud", Namespace: "a"},
			NetworkData:    &corev1.SecretReference{Name: "nd"},
			MetaData:       &corev1.SecretReference{Name: "md", Namespace: "a"},
		},
	}
}

func TestValidateHost(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(h *metal3v1.BareMetalHost)
		want    string // the whole error, or empty for none
		wantAlt string // a second error, when two are expected
	}{
		{name: "valid", edit: func(*metal3v1.BareMetalHost) {}},
		{name: "bare host", edit: func(h *metal3v1.BareMetalHost) { h.Spec = metal3v1.BareMetalHostSpec{} }},
		{name: "ipmi", edit: func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "ipmi://10.0.0.1:6230" }},
		{name: "file image, live-iso, auto checksum", edit: func(h *metal3v1.BareMetalHost) {
			h.Spec.Image = &metal3v1.Image{URL: "file:///images/live.iso", ChecksumType: metal3v1.AutoChecksum, DiskFormat: ptr.To("live-iso")}
		}},
		{name: "image and customDeploy together, as upstream allows", edit: func(h *metal3v1.BareMetalHost) {
			h.Spec.CustomDeploy = &metal3v1.CustomDeploy{Method: "start_assisted_install"}
		}},
		{name: "userData in another namespace", edit: func(h *metal3v1.BareMetalHost) { h.Spec.UserData.Namespace = "b" },
			want: `spec.userData.namespace: Forbidden: must be the BareMetalHost's namespace "a" (a host may only use Secrets of its own namespace)`},
		{name: "networkData in another namespace", edit: func(h *metal3v1.BareMetalHost) { h.Spec.NetworkData.Namespace = "kube-system" },
			want: `spec.networkData.namespace: Forbidden: must be the BareMetalHost's namespace "a"`},
		{name: "metaData in another namespace", edit: func(h *metal3v1.BareMetalHost) { h.Spec.MetaData.Namespace = "b" },
			want: `spec.metaData.namespace: Forbidden`},
		{name: "BMC scheme", edit: func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "ftp://x" },
			want: `spec.bmc.address: Invalid value: "ftp://x": unsupported scheme "ftp"; supported schemes are idrac-virtualmedia, ilo5-virtualmedia, ipmi, redfish, redfish-virtualmedia`},
		{name: "BMC credentials in the address", edit: func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "redfish://root:canary@10.0.0.1" },
			want: `spec.bmc.address: Invalid value: "redfish://redacted@10.0.0.1": must not carry a username or password`},
		{name: "BMC password with URL delimiters", edit: func(h *metal3v1.BareMetalHost) {
			h.Spec.BMC.Address = "redfish://root:canary/a?b#c@d@10.0.0.1/redfish/v1/Systems/1"
		}, want: `spec.bmc.address: Invalid value: "redfish://redacted@10.0.0.1/redfish/v1/Systems/1": is not a URL`},
		{name: "BMC password with a slash after a numeric port", edit: func(h *metal3v1.BareMetalHost) {
			h.Spec.BMC.Address = "redfish://root:1/canary@10.0.0.1/redfish/v1/Systems/1"
		}, want: `spec.bmc.address: Invalid value: "redfish://redacted@10.0.0.1/redfish/v1/Systems/1": has an "@" in its path`},
		{name: "boot MAC", edit: func(h *metal3v1.BareMetalHost) { h.Spec.BootMACAddress = "52:54:00:00:00" },
			want: `spec.bootMACAddress: Invalid value: "52:54:00:00:00": must be a MAC address`},
		{name: "image URL missing", edit: func(h *metal3v1.BareMetalHost) { h.Spec.Image.URL = "" },
			want: `spec.image.url: Required value`},
		{name: "image URL scheme", edit: func(h *metal3v1.BareMetalHost) { h.Spec.Image.URL = "ftp://images/rhcos.raw" },
			want: `spec.image.url: Invalid value: "ftp://images/rhcos.raw": unsupported scheme "ftp": must be an http, https or file URL`},
		{name: "image URL without host", edit: func(h *metal3v1.BareMetalHost) { h.Spec.Image.URL = "http:///rhcos.raw" },
			want: `spec.image.url: Invalid value: "http:///rhcos.raw": must name a host`},
		{name: "image URL relative", edit: func(h *metal3v1.BareMetalHost) { h.Spec.Image.URL = "rhcos.raw" },
			want: `spec.image.url: Invalid value: "rhcos.raw": unsupported scheme ""`},
		{name: "image URL does not parse", edit: func(h *metal3v1.BareMetalHost) { h.Spec.Image.URL = "http://%zz" },
			want: `spec.image.url: Invalid value: "http://%zz": must be an http, https or file URL`},
		{name: "file URL without a file", edit: func(h *metal3v1.BareMetalHost) { h.Spec.Image.URL = "file:///" },
			want: `spec.image.url: Invalid value: "file:///": must name a file`},
		{name: "checksum type", edit: func(h *metal3v1.BareMetalHost) { h.Spec.Image.ChecksumType = "crc32" },
			want: `spec.image.checksumType: Unsupported value: "crc32": supported values: "md5", "sha256", "sha512", "auto"`},
		{name: "disk format", edit: func(h *metal3v1.BareMetalHost) { h.Spec.Image.DiskFormat = ptr.To("iso") },
			want: `spec.image.format: Unsupported value: "iso": supported values: "raw", "qcow2", "vdi", "vmdk", "live-iso"`},
		{name: "customDeploy without a method", edit: func(h *metal3v1.BareMetalHost) { h.Spec.CustomDeploy = &metal3v1.CustomDeploy{} },
			want: `spec.customDeploy.method: Required value`},
		{name: "cluster in another namespace", edit: func(h *metal3v1.BareMetalHost) {
			h.Annotations = map[string]string{ClusterReferenceAnnotation: "b/cluster"}
		},
			want: `metadata.annotations[bmac.agent-install.openshift.io/cluster-reference]: Forbidden: must name a ClusterDeployment of the BareMetalHost's namespace "a"`},
		{name: "cluster in the host's namespace", edit: func(h *metal3v1.BareMetalHost) {
			h.Annotations = map[string]string{ClusterReferenceAnnotation: "a/cluster"}
		}},
		{name: "two problems", edit: func(h *metal3v1.BareMetalHost) { h.Spec.UserData.Namespace = "b"; h.Spec.BMC.Address = "ftp://x" },
			want: `spec.userData.namespace: Forbidden`, wantAlt: `spec.bmc.address: Invalid value: "ftp://x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := validHost()
			tt.edit(h)
			_, err := (&BareMetalHost{Reader: noHosts{}}).ValidateCreate(context.Background(), h)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(HavePrefix(`BareMetalHost.metal3.io "h0" is invalid: `))
			g.Expect(err.Error()).To(ContainSubstring(tt.want))
			g.Expect(err.Error()).NotTo(ContainSubstring("canary"))
			n := 1
			if tt.wantAlt != "" {
				n = 2
				g.Expect(err.Error()).To(ContainSubstring(tt.wantAlt))
			}
			g.Expect(ValidateHost(h)).To(HaveLen(n))
		})
	}
}

// TestValidateUpdate: an update may keep a problem the host had, never add one.
func TestValidateUpdate(t *testing.T) {
	g := NewWithT(t)
	w := &BareMetalHost{Reader: noHosts{}}
	old := validHost()
	old.Spec.UserData.Namespace = "b" // from before the webhook
	host := old.DeepCopy()
	host.Finalizers = []string{metal3v1.BareMetalHostFinalizer}
	_, err := w.ValidateUpdate(context.Background(), old, host)
	g.Expect(err).NotTo(HaveOccurred(), "a finalizer on a host with an old problem")

	host.Spec.UserData.Namespace = "c"
	_, err = w.ValidateUpdate(context.Background(), old, host)
	g.Expect(err).To(MatchError(ContainSubstring("spec.userData.namespace: Forbidden")), "another foreign namespace is a new problem")

	host = validHost()
	host.Spec.MetaData.Namespace = "b"
	_, err = w.ValidateUpdate(context.Background(), validHost(), host)
	g.Expect(err).To(MatchError(ContainSubstring("spec.metaData.namespace: Forbidden")))

	host.Spec.MetaData.Namespace = ""
	_, err = w.ValidateUpdate(context.Background(), old, host)
	g.Expect(err).NotTo(HaveOccurred(), "a fixed host")

	_, err = w.ValidateDelete(context.Background(), old)
	g.Expect(err).NotTo(HaveOccurred())
}

// TestBMCAddressesAsTheEngineReadsThem: the webhook accepts exactly the
// addresses the host engine's driver factory parses, with the same
// meaning, except addresses that carry credentials.
func TestBMCAddressesAsTheEngineReadsThem(t *testing.T) {
	var addrs []string
	for _, s := range metal3v1.BMCSchemes() {
		addrs = append(addrs, s+"://10.0.0.1", s+"://[fd00::1]:8443/redfish/v1/Systems/1/", s+"://bmc.example.com/redfish/v1")
	}
	addrs = append(addrs, "ftp://x", "ipmi+http://x", "redfish+ftp://x", "10.0.0.1", "", "redfish:///x", "ipmi://h:bad",
		"idrac-redfish://x", "REDFISH://h", "%%")
	for _, a := range addrs {
		g := NewWithT(t)
		want, wantErr := provisioner.ParseAddress(a)
		got, err := metal3v1.ParseBMCAddress(a)
		g.Expect(err != nil).To(Equal(wantErr != nil), "%q: engine %v, api %v", a, wantErr, err)
		if err == nil {
			g.Expect(got.Driver).To(Equal(want.Driver), a)
			g.Expect(got.Endpoint).To(Equal(want.Endpoint), a)
			g.Expect(got.SystemPath).To(Equal(want.SystemPath), a)
			g.Expect(got.VirtualMedia).To(Equal(want.VirtualMedia), a)
		}
		h := validHost()
		h.Spec.BMC.Address = a
		g.Expect(ValidateHost(h) == nil).To(Equal(a == "" || wantErr == nil), a)
	}
	g := NewWithT(t)
	_, err := provisioner.ParseAddress("redfish://u:p@h")
	g.Expect(err).NotTo(HaveOccurred(), "the engine ignores credentials in an address; the webhook refuses them")
	g.Expect(metal3v1.ValidateBMCAddress("redfish://u:p@h")).To(MatchError(ContainSubstring("must not carry")))
	g.Expect(strings.Join(metal3v1.BMCSchemes(), " ")).To(ContainSubstring("idrac-virtualmedia+https"))
}

// noHosts is a hub without BareMetalHosts, for the checks of a host on its
// own (the envtest checks the boot MAC's uniqueness).
type noHosts struct{ client.Reader }

func (noHosts) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }
