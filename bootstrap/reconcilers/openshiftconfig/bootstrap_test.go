package openshiftconfig

import (
	"context"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
)

// renderedFiles returns the files of a config's rendered Ignition, read
// from the served Secret when the data Secret only points there.
func renderedFiles(g Gomega, cfg *bootstrapv1.OpenShiftConfig) map[string]string {
	ctx := context.Background()
	data := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: *cfg.Status.DataSecretName}, data)).To(Succeed())
	full := data.Data["value"]
	served := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Name + servedSuffix}, served); err == nil {
		full = served.Data["value"]
	}
	parsed, _, err := v3_4.Parse(full)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, f := range parsed.Storage.Files {
		out[f.Path] = fileText(g, f)
	}
	return out
}

func fileText(g Gomega, f types.File) string {
	return dataURLText(g, f.Contents.Source)
}

func reasonOf(g Gomega, cfg *bootstrapv1.OpenShiftConfig) *metav1.Condition {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	c := conditions.Get(cfg, bootstrapv1.DataSecretAvailableCondition)
	g.Expect(c).NotTo(BeNil())
	return c
}

// TestBootstrapConfigRendersPushedInputs: a bootstrap node's config is
// rendered from what spec.bootstrap names, as the control plane wrote it —
// the install-config and pull secret as given (the provider parses neither
// and reads no control plane), the install state, the selected manifests,
// the release — and a config without spec.bootstrap, or whose
// install-config still holds secrets, says so and renders nothing.
func TestBootstrapConfigRendersPushedInputs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cluster(t, ns, true)

	_, bare := machineWith(t, ns, "bare", bootstrapv1.OpenShiftConfigSpec{Role: bootstrapv1.RoleBootstrap})
	g.Eventually(func(g Gomega) {
		c := reasonOf(g, bare)
		g.Expect(c.Reason).To(Equal(bootstrapv1.BootstrapNeedsControlPlaneReason))
		g.Expect(c.Message).To(ContainSubstring("spec.bootstrap is empty"))
	}).Should(Succeed())

	inputs := &bootstrapv1.BootstrapInputs{
		InstallConfigRef:  bootstrapv1.SecretReference{Name: "ocp-bootstrap-install-config"},
		InstallStateRef:   bootstrapv1.SecretReference{Name: "ocp-install-state"},
		ManifestsSelector: metav1.LabelSelector{MatchLabels: map[string]string{"manifests": "ocp"}},
		ReleaseVersion:    "4.20.0",
	}
	_, cfg := machineWith(t, ns, "ocp-bootstrap", bootstrapv1.OpenShiftConfigSpec{Role: bootstrapv1.RoleBootstrap, Bootstrap: inputs})
	g.Eventually(func(g Gomega) {
		c := reasonOf(g, cfg)
		g.Expect(c.Reason).To(Equal(bootstrapv1.WaitingForInstallConfigReason))
		g.Expect(c.Message).To(ContainSubstring("ocp-bootstrap-install-config (spec.bootstrap.installConfigRef)"))
	}).Should(Succeed())

	// An install-config that still holds the pull secret is refused.
	const installConfig = "apiVersion: v1\nbaseDomain: example.com\nmetadata:\n  name: ocp\n# as the control plane wrote it\n"
	const pullSecret = `{"auths":{"quay.io":{"auth":"c2VjcmV0"}}}`
	ic := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: inputs.InstallConfigRef.Name, Namespace: ns}, Data: map[string][]byte{
		bootstrapv1.InstallConfigKey: []byte(installConfig + "pullSecret: '" + pullSecret + "'\n"), bootstrapv1.PullSecretKey: []byte(pullSecret),
	}}
	g.Expect(env.Client.Create(ctx, ic)).To(Succeed())
	ca := caSecret(t, ns)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: inputs.InstallStateRef.Name, Namespace: ns}, Data: map[string][]byte{
		bootstrapv1.InstallStateCACertKey: ca.Data["tls.crt"], bootstrapv1.InstallStateCAKeyKey: ca.Data["tls.key"],
		bootstrapv1.InstallStateKubeconfigKey: []byte("apiVersion: v1\nkind: Config\n"),
	}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ocp-manifest-extra", Namespace: ns,
		Labels: map[string]string{"manifests": "ocp"}, Annotations: map[string]string{bootstrapv1.ManifestAnnotation: bootstrapv1.ManifestTypeOpenShift}},
		Data: map[string][]byte{"99-extra.yaml": []byte("kind: ConfigMap\n")}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := reasonOf(g, cfg)
		g.Expect(c.Reason).To(Equal(bootstrapv1.InvalidInstallConfigReason))
		g.Expect(c.Message).To(ContainSubstring("no pull secret"))
		g.Expect(c.Message).NotTo(ContainSubstring("c2VjcmV0"))
	}).Should(Succeed())
	g.Expect(cfg.Status.DataSecretName).To(BeNil(), "nothing rendered")

	// As the control plane writes it: the pull secret beside, not inside.
	ic.Data[bootstrapv1.InstallConfigKey] = []byte(installConfig)
	g.Expect(env.Client.Update(ctx, ic)).To(Succeed())
	// The Secret is not watched: the config looks again by itself.
	// (The patch helper writes conditions before the other status fields.)
	g.Eventually(func(g Gomega) {
		g.Expect(reasonOf(g, cfg).Reason).To(Equal(bootstrapv1.DataSecretCreatedReason))
		g.Expect(cfg.Status.Initialization.DataSecretCreated).To(HaveValue(BeTrue()))
	}).Should(Succeed())
	g.Expect(cfg.Status.Role).To(Equal(bootstrapv1.RoleBootstrap))
	files := renderedFiles(g, cfg)
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.InstallConfigPath, installConfig), "the install-config as the control plane wrote it")
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.PullSecretPath, pullSecret))
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.ReleaseVersionPath, "4.20.0"))
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.RootCACertPath, string(ca.Data["tls.crt"])))
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.OpenShiftManifestsDir+"/99-extra.yaml", "kind: ConfigMap\n"))
}

// TestMachineConfigServerHost: masters and workers fetch their config from
// spec.machineConfigServerHost (api-int), else from the API VIP.
func TestMachineConfigServerHost(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	cluster(t, ns, true)
	_, cfg := machineWith(t, ns, "master-int", bootstrapv1.OpenShiftConfigSpec{MachineConfigServerHost: "api-int.ocp.example.com"})
	g.Eventually(func(g Gomega) {
		g.Expect(reasonOf(g, cfg).Reason).To(Equal(bootstrapv1.DataSecretCreatedReason))
		g.Expect(cfg.Status.Initialization.DataSecretCreated).To(HaveValue(BeTrue()))
	}).Should(Succeed())
	data := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: *cfg.Status.DataSecretName}, data)).To(Succeed())
	parsed, _, err := v3_4.Parse(data.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed.Ignition.Config.Merge).To(HaveLen(1))
	g.Expect(parsed.Ignition.Config.Merge[0].Source).To(HaveValue(Equal("https://api-int.ocp.example.com:22623/config/master")))
}

// TestConfigSpecAdmission: the API server refuses what cannot render — a
// bootstrap input on a config of another role, a machine-config-server
// host that is a URL or names a port — saying which field.
func TestConfigSpecAdmission(t *testing.T) {
	ns := env.Namespace(t)
	inputs := &bootstrapv1.BootstrapInputs{InstallConfigRef: bootstrapv1.SecretReference{Name: "ic"},
		InstallStateRef: bootstrapv1.SecretReference{Name: "st"}, ReleaseVersion: "4.20.0"}
	for _, tt := range []struct {
		name string
		spec bootstrapv1.OpenShiftConfigSpec
		want string // "" means accepted
	}{
		{"bootstrap inputs on a master", bootstrapv1.OpenShiftConfigSpec{Role: bootstrapv1.RoleMaster, Bootstrap: inputs}, "bootstrap is only for role bootstrap"},
		{"bootstrap inputs without a role", bootstrapv1.OpenShiftConfigSpec{Bootstrap: inputs}, "bootstrap is only for role bootstrap"},
		{"bootstrap inputs on the bootstrap node", bootstrapv1.OpenShiftConfigSpec{Role: bootstrapv1.RoleBootstrap, Bootstrap: inputs}, ""},
		{"host as a URL", bootstrapv1.OpenShiftConfigSpec{MachineConfigServerHost: "https://api-int.ocp.example.com"}, "spec.machineConfigServerHost"},
		{"host with a port", bootstrapv1.OpenShiftConfigSpec{MachineConfigServerHost: "api-int.ocp.example.com:22623"}, "spec.machineConfigServerHost"},
		{"host name", bootstrapv1.OpenShiftConfigSpec{MachineConfigServerHost: "api-int.ocp.example.com"}, ""},
		{"IPv4 address", bootstrapv1.OpenShiftConfigSpec{MachineConfigServerHost: "192.0.2.10"}, ""},
		{"IPv6 address", bootstrapv1.OpenShiftConfigSpec{MachineConfigServerHost: "2001:db8::10"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := &bootstrapv1.OpenShiftConfig{ObjectMeta: metav1.ObjectMeta{GenerateName: "adm-", Namespace: ns}, Spec: tt.spec}
			err := env.Client.Create(context.Background(), cfg)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}
