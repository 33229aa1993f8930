package openshiftconfig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_4"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// caSecret holds a real CA: Cluster API itself reads <cluster>-ca to write
// the cluster's kubeconfig.
func caSecret(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ocp-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ocp-ca", Namespace: ns}, Data: map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}}
}

// dataURLText decodes a data URL as the renderer writes them.
func dataURLText(g Gomega, src *string) string {
	g.Expect(src).NotTo(BeNil())
	enc, ok := strings.CutPrefix(*src, "data:text/plain;charset=utf-8;base64,")
	g.Expect(ok).To(BeTrue(), "a base64 data URL: %.60s", *src)
	b, err := base64.StdEncoding.DecodeString(enc)
	g.Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// cluster creates a Cluster on a MetalCluster with the API VIP 192.0.2.10.
func cluster(t *testing.T, ns string, withCA bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &infrav1.MetalCluster{ObjectMeta: metav1.ObjectMeta{Name: "ocp", Namespace: ns},
		Spec: infrav1.MetalClusterSpec{ControlPlaneEndpoint: infrav1.APIEndpoint{Host: "192.0.2.10", Port: 6443}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "ocp", Namespace: ns}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MetalCluster", Name: "ocp"},
	}})).To(Succeed())
	if withCA {
		g.Expect(env.Client.Create(ctx, caSecret(t, ns))).To(Succeed())
	}
}

// machine creates an OpenShiftConfig, a MetalMachine and a control-plane
// Machine that references both.
func machine(t *testing.T, ns, name, override string) (*clusterv1.Machine, *bootstrapv1.OpenShiftConfig) {
	t.Helper()
	return machineWith(t, ns, name, bootstrapv1.OpenShiftConfigSpec{IgnitionOverride: override})
}

// machineWith is machine with the config's whole spec.
func machineWith(t *testing.T, ns, name string, spec bootstrapv1.OpenShiftConfigSpec) (*clusterv1.Machine, *bootstrapv1.OpenShiftConfig) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	lbls := map[string]string{clusterv1.ClusterNameLabel: "ocp"}
	cfg := &bootstrapv1.OpenShiftConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls}, Spec: spec}
	g.Expect(env.Client.Create(ctx, cfg)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &infrav1.MetalMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
		Spec: infrav1.MetalMachineSpec{Image: infrav1.Image{URL: "http://images/rhcos.raw", Checksum: "abc", ChecksumType: "sha256"}}})).To(Succeed())
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "ocp", clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "ocp",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "OpenShiftConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MetalMachine", Name: name},
		},
	}
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	return m, cfg
}

func setHostState(t *testing.T, h *metal3v1.BareMetalHost, state metal3v1.ProvisioningState) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(h), h); err != nil {
			return err
		}
		h.Status.OperationalStatus = metal3v1.OperationalStatusOK
		h.Status.Provisioning.State = state
		return env.Client.Status().Update(context.Background(), h)
	}).Should(Succeed())
}

// TestMasterMachinePhases: a control-plane Machine with an OpenShiftConfig
// and a MetalMachine goes Pending → Provisioning → Provisioned under
// upstream Cluster API, and its host gets a valid Ignition pointer config.
func TestMasterMachinePhases(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cluster(t, ns, true)
	host := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "master-0", Namespace: ns},
		Spec: metal3v1.BareMetalHostSpec{BMC: metal3v1.BMCDetails{Address: "redfish://bmc/redfish/v1/Systems/0", CredentialsName: "bmc"}}}
	g.Expect(env.Client.Create(ctx, host)).To(Succeed())
	setHostState(t, host, metal3v1.StateAvailable)
	m, cfg := machine(t, ns, "master-a", `{"ignition":{"version":"3.2.0"}}`)

	var phases []string
	observe := func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
		if p := m.Status.Phase; p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
		}
		return m.Status.Phase
	}
	g.Eventually(func(g Gomega) { g.Expect(observe(g)).To(Equal("Provisioning")) }).Should(Succeed())

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	g.Expect(cfg.Status.Role).To(Equal(bootstrapv1.RoleMaster))
	g.Expect(conditions.IsTrue(cfg, bootstrapv1.DataSecretAvailableCondition)).To(BeTrue())
	data := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: *cfg.Status.DataSecretName}, data)).To(Succeed())
	g.Expect(string(data.Data["format"])).To(Equal("ignition"))
	parsed, _, err := v3_4.Parse(data.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	merge := parsed.Ignition.Config.Merge
	g.Expect(merge).To(HaveLen(2))
	g.Expect(merge[0].Source).To(HaveValue(Equal("https://192.0.2.10:22623/config/master")), "the master's config from the machine-config-server")
	g.Expect(dataURLText(g, merge[1].Source)).To(Equal(`{"ignition":{"version":"3.2.0"}}`), "then the override, as given")
	ca := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ocp-ca"}, ca)).To(Succeed())
	g.Expect(parsed.Ignition.Security.TLS.CertificateAuthorities).To(HaveLen(1))
	g.Expect(dataURLText(g, parsed.Ignition.Security.TLS.CertificateAuthorities[0].Source)).To(Equal(string(ca.Data["tls.crt"])),
		"the machine-config-server is trusted through the cluster's CA")

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)).To(Succeed())
		g.Expect(host.Spec.UserData).NotTo(BeNil())
		ud := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: host.Spec.UserData.Name}, ud)).To(Succeed())
		g.Expect(ud.Data["userData"]).To(Equal(data.Data["value"]), "the host boots the Machine's Ignition")
	}).Should(Succeed())

	setHostState(t, host, metal3v1.StateProvisioned)
	g.Eventually(func(g Gomega) { g.Expect(observe(g)).To(Equal("Provisioned")) }).Should(Succeed())
	g.Expect(phases).To(Equal([]string{"Pending", "Provisioning", "Provisioned"}), "in this order, by upstream Cluster API")
}

// TestConfigConditions: what is missing, or wrong, is a condition that says so.
func TestConfigConditions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cluster(t, ns, false)
	_, noCA := machine(t, ns, "no-ca", "")
	_, bad := machine(t, ns, "bad-override", `{"ignition":{"version":"2.2.0"}}`)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(noCA), noCA)).To(Succeed())
		c := conditions.Get(noCA, bootstrapv1.DataSecretAvailableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(bootstrapv1.WaitingForClusterCAReason))
		g.Expect(c.Message).To(ContainSubstring(ns + "/ocp-ca"))
	}).Should(Succeed())
	g.Expect(env.Client.Create(ctx, caSecret(t, ns))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(bad), bad)).To(Succeed())
		c := conditions.Get(bad, bootstrapv1.DataSecretAvailableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(bootstrapv1.InvalidIgnitionOverrideReason))
		g.Expect(c.Message).To(ContainSubstring("spec.ignitionOverride"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(noCA), noCA)).To(Succeed())
		g.Expect(noCA.Status.Initialization.DataSecretCreated).To(HaveValue(BeTrue()))
	}, "30s").Should(Succeed(), "once the CA exists the config renders")
}

// TestOversizeConfigIsServed: a config larger than user data holds is
// served by the ignition server; the Machine's data Secret holds a small
// config that merges it with a bearer token and its SHA-512, and only that
// token reads it.
func TestOversizeConfigIsServed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cluster(t, ns, true)
	payload := make([]byte, 100<<10)
	_, _ = rand.Read(payload)
	override := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/big","contents":{"source":"data:;base64,%s"}}]}}`,
		base64.StdEncoding.EncodeToString(payload))
	_, cfg := machine(t, ns, "big", override)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
		g.Expect(cfg.Status.Initialization.DataSecretCreated).To(HaveValue(BeTrue()))
	}).Should(Succeed())
	c := conditions.Get(cfg, bootstrapv1.DataSecretAvailableCondition)
	g.Expect(c.Message).To(ContainSubstring("served by the hub's ignition server"))

	data := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: *cfg.Status.DataSecretName}, data)).To(Succeed())
	pointer := data.Data["value"]
	g.Expect(len(pointer)).To(BeNumerically("<", 4<<10), "the user data is small")
	parsed, _, err := v3_4.Parse(pointer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed.Ignition.Config.Merge).To(HaveLen(1))
	src := parsed.Ignition.Config.Merge[0]
	g.Expect(src.HTTPHeaders).To(HaveLen(1))
	auth := *src.HTTPHeaders[0].Value
	g.Expect(string(pointer)).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString(payload[:64])), "the payload is not in user data")

	get := func(url, auth string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	code, full := get(*src.Source, auth)
	g.Expect(code).To(Equal(http.StatusOK))
	sum := sha512.Sum512(full)
	g.Expect(*src.Verification.Hash).To(Equal("sha512-" + hex.EncodeToString(sum[:])))
	g.Expect(string(full)).To(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(override))[:64]), "the full config merges the override")

	code, _ = get(*src.Source, "")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, _ = get(*src.Source, "Bearer "+ignitionServer.Token(ns, "big-ignition", "another-uid"))
	g.Expect(code).To(Equal(http.StatusForbidden), "a token for another owner")
	// The token is for this Secret only: not for the data Secret next to it.
	code, _ = get(ignitionServer.URL(ns, data.Name), auth)
	g.Expect(code).To(Equal(http.StatusForbidden))
}

// TestOversizeConfigWithoutServer: without an ignition server a config too
// large for user data is refused with a condition saying what to do.
func TestOversizeConfigWithoutServer(t *testing.T) {
	g := NewWithT(t)
	cfg := &bootstrapv1.OpenShiftConfig{Status: bootstrapv1.OpenShiftConfigStatus{Role: bootstrapv1.RoleBootstrap}}
	_, _, err := (&Reconciler{MaxUserDataBytes: 1000}).fitUserData(context.Background(), cfg, &clusterv1.Cluster{}, make([]byte, 1001))
	g.Expect(err).To(MatchError(errInvalidSpec))
	c := conditions.Get(cfg, bootstrapv1.DataSecretAvailableCondition)
	g.Expect(c.Reason).To(Equal(bootstrapv1.UserDataTooLargeReason))
	g.Expect(c.Message).To(ContainSubstring("1001 bytes, more than the 1000 bytes"))

	small, _, err := (&Reconciler{MaxUserDataBytes: 1000}).fitUserData(context.Background(), cfg, &clusterv1.Cluster{}, make([]byte, 1000))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(small).To(HaveLen(1000), "a config that fits is user data as is")
}
