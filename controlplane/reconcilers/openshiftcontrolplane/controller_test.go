package openshiftcontrolplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/installer"
	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/internal/shard"
)

// applyInstall creates what `metalshift create cluster` applies, except the
// hosts, for an install-config whose API VIP nothing listens on; w, when
// set, plays the installed cluster behind that VIP.
func applyInstall(t *testing.T, w *fakeWorkload, edits ...func(client.Object)) (name, vip string) {
	t.Helper()
	g := NewWithT(t)
	name = fmt.Sprintf("cp-%d", rand.IntN(1_000_000))
	vip = fmt.Sprintf("127.%d.%d.7", 200+rand.IntN(50), rand.IntN(250))
	if w != nil {
		fakeWorkloads.Store(name, w)
		t.Cleanup(func() { fakeWorkloads.Delete(name) })
	}
	ic := &installconfig.InstallConfig{
		APIVersion: "v1", BaseDomain: "example.com", Metadata: installconfig.Metadata{Name: name},
		ControlPlane: installconfig.MachinePool{Name: "master", Replicas: ptr.To[int32](3)},
		Platform:     installconfig.Platform{BareMetal: &installconfig.BareMetal{APIVIPs: []string{vip}}},
		PullSecret:   `{"auths":{}}`,
		Metalshift:   &installconfig.Metalshift{OSImage: installconfig.OSImage{URL: "http://images/rhcos.raw", Checksum: "abc"}},
	}
	for i := range 4 {
		ic.Platform.BareMetal.Hosts = append(ic.Platform.BareMetal.Hosts, installconfig.Host{
			Name: fmt.Sprintf("h%d", i), BootMACAddress: fmt.Sprintf("52:54:00:cc:00:%02x", i),
			BMC: installconfig.BMC{Address: "redfish://bmc/redfish/v1/Systems/1", Username: "u", Password: "p"},
		})
	}
	g.Expect(ic.Validate()).To(BeEmpty())
	raw, err := yaml.Marshal(ic)
	g.Expect(err).NotTo(HaveOccurred())
	ca, err := certs.NewCA("root-ca")
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://" + vip + ":6443\n    certificate-authority-data: " +
		base64.StdEncoding.EncodeToString(ca.Cert) + "\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"
	objs, err := installer.HubObjects(ic, raw, ca, []byte(kubeconfig))
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if _, ok := o.(*metal3v1.BareMetalHost); ok {
			continue
		}
		for _, edit := range edits {
			edit(o)
		}
		g.Expect(env.Client.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
	}
	dir := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(dir, "manifests"), 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "manifests", "extra.yaml"), []byte("kind: ConfigMap\n"), 0o600)).To(Succeed())
	secrets, err := installer.WrapManifests(dir, name)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range secrets {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	return name, vip
}

// TestBootstrapNeverServes: the control plane creates the bootstrap Machine
// with the bootstrap node's Ignition, owns the kubeconfig and CA Secrets,
// and, when the provisioned bootstrap node does not serve the API, says so
// in BootstrapReady and creates no master. Deleting the Cluster removes the
// bootstrap Machine and lets the control plane go.
func TestBootstrapNeverServes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name, vip := applyInstall(t, nil)
	ns := name
	bootstrap := name + "-bootstrap"

	m := &clusterv1.Machine{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bootstrap}, m) }).Should(Succeed())
	g.Expect(m.Labels).To(HaveKey(controlplanev1.BootstrapMachineLabel))
	g.Expect(m.Labels).To(HaveKey(clusterv1.MachineControlPlaneLabel), "Cluster API deletes it with the control plane")
	// The scale subresource's selector picks masters, not the bootstrap Machine.
	g.Eventually(func(g Gomega) {
		cp := &controlplanev1.OpenShiftControlPlane{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cp)).To(Succeed())
		sel, err := labels.Parse(cp.Status.Selector)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sel.Matches(labels.Set(m.Labels))).To(BeFalse(), cp.Status.Selector)
		g.Expect(sel.Matches(labels.Set{clusterv1.ClusterNameLabel: name, clusterv1.MachineControlPlaneLabel: ""})).To(BeTrue(), cp.Status.Selector)
	}).Should(Succeed())
	for _, s := range []string{name + "-kubeconfig", name + "-ca"} {
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s}, sec)).To(Succeed())
		g.Expect(sec.OwnerReferences).To(ContainElement(HaveField("Kind", "OpenShiftControlPlane")), s)
	}

	// The bootstrap node's config: install-config, manifests, CA, kubeconfig, the bootstrap service.
	cfg := &bootstrapv1.OpenShiftConfig{}
	g.Eventually(func() bool {
		_ = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bootstrap}, cfg)
		return ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false)
	}).Should(BeTrue())
	data := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: *cfg.Status.DataSecretName}, data)).To(Succeed())
	var rendered struct {
		Storage struct {
			Files []struct {
				Path     string
				Contents struct{ Source string }
			}
		}
		Systemd struct {
			Units []struct {
				Name    string
				Enabled bool
			}
		}
	}
	g.Expect(json.Unmarshal(data.Data["value"], &rendered)).To(Succeed())
	files := map[string]string{}
	for _, f := range rendered.Storage.Files {
		enc, ok := strings.CutPrefix(f.Contents.Source, "data:text/plain;charset=utf-8;base64,")
		g.Expect(ok).To(BeTrue(), f.Path)
		b, err := base64.StdEncoding.DecodeString(enc)
		g.Expect(err).NotTo(HaveOccurred(), f.Path)
		files[f.Path] = string(b)
	}
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.ManifestsDir+"/extra.yaml", "kind: ConfigMap\n"), "the user's manifest, as written")
	g.Expect(files[bootstrapnode.InstallConfigPath]).To(ContainSubstring("name: " + name))
	caSecret, kubeconfig := &corev1.Secret{}, &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-ca"}, caSecret)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, kubeconfig)).To(Succeed())
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.RootCACertPath, string(caSecret.Data["tls.crt"])))
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.RootCAKeyPath, string(caSecret.Data["tls.key"])))
	g.Expect(files).To(HaveKeyWithValue(bootstrapnode.AdminKubeconfigPath, string(kubeconfig.Data["value"])))
	g.Expect(rendered.Systemd.Units).To(ContainElement(HaveField("Name", bootstrapnode.BootstrapServiceName)))
	for _, u := range rendered.Systemd.Units {
		g.Expect(u.Enabled).To(BeTrue(), u.Name)
	}

	// Play the infrastructure provider: the bootstrap host is provisioned.
	mm := &infrav1.MetalMachine{}
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bootstrap}, mm); err != nil {
			return err
		}
		mm.Spec.ProviderID = "metal3://" + ns + "/h0/uid"
		return env.Client.Update(ctx, mm)
	}).Should(Succeed())
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mm), mm); err != nil {
			return err
		}
		mm.Status.Initialization.Provisioned = ptr.To(true)
		return env.Client.Status().Update(ctx, mm)
	}).Should(Succeed())

	cp := &controlplanev1.OpenShiftControlPlane{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cp)).To(Succeed())
		c := conditions.Get(cp, controlplanev1.BootstrapReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controlplanev1.BootstrapNotServingReason))
		g.Expect(c.Message).To(ContainSubstring(bootstrap))
		g.Expect(c.Message).To(ContainSubstring("https://" + vip + ":6443"))
		g.Expect(c.Message).To(ContainSubstring("has not answered for more than 1s"))
		g.Expect(c.Message).To(ContainSubstring("dial tcp "+vip+":6443"), "what failed, asked directly while the ClusterCache is not connected")
	}).Should(Succeed())
	// Said once as a Warning event, not at every poll.
	g.Eventually(func(g Gomega) {
		evs := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
		n := 0
		for _, e := range evs.Items {
			if e.Reason == controlplanev1.BootstrapNotServingReason && e.Type == corev1.EventTypeWarning {
				n++
			}
		}
		g.Expect(n).To(Equal(1))
	}).Should(Succeed())
	g.Expect(cp.Status.BootstrapPhase).To(Equal(controlplanev1.BootstrapPhaseProvisioning))
	g.Expect(ptr.Deref(cp.Status.Initialization.ControlPlaneInitialized, false)).To(BeFalse())
	machines := &clusterv1.MachineList{}
	g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
	g.Expect(machines.Items).To(HaveLen(1), "no master before the bootstrap node serves")

	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &controlplanev1.OpenShiftControlPlane{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), func() string {
		ms := &clusterv1.MachineList{}
		_ = env.Client.List(ctx, ms, client.InNamespace(ns))
		out := ""
		for _, m := range ms.Items {
			for _, c := range m.Status.Conditions {
				out += fmt.Sprintf("%s %s=%s %s: %s\n", m.Name, c.Type, c.Status, c.Reason, c.Message)
			}
		}
		_ = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cp)
		return fmt.Sprintf("the control plane's finalizer is released once its Machines are gone; control plane %v finalizers %v\n%s", cp.DeletionTimestamp, cp.Finalizers, out)
	})
	g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
	g.Expect(machines.Items).To(BeEmpty())
}

// TestWorkloadKubeconfigRefused: a Cluster's kubeconfig Secret is written
// by whoever may write Secrets in its namespace; one with an exec plugin
// is refused by name in BootstrapReady, by the hub's ClusterCache and by
// the direct path alike, and its command never runs.
func TestWorkloadKubeconfigRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "exec-ran")
	name, _ := applyInstall(t, nil, func(o client.Object) {
		// The install state's kubeconfig, which the control plane copies
		// to <cluster>-kubeconfig.
		if s, ok := o.(*corev1.Secret); ok && s.Data[controlplanev1.InstallStateKubeconfigKey] != nil {
			s.Data[controlplanev1.InstallStateKubeconfigKey] = []byte("apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n" +
				"clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user:\n    exec:\n" +
				"      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      command: /bin/sh\n      args: [-c, 'touch " + marker + "']\n")
		}
	})
	ns, bootstrap := name, name+"-bootstrap"
	mm := &infrav1.MetalMachine{}
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bootstrap}, mm); err != nil {
			return err
		}
		mm.Spec.ProviderID = "metal3://" + ns + "/h0/uid"
		return env.Client.Update(ctx, mm)
	}).Should(Succeed())
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mm), mm); err != nil {
			return err
		}
		mm.Status.Initialization.Provisioned = ptr.To(true)
		return env.Client.Status().Update(ctx, mm)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := conditionOf(g, controlPlane(g, ns, name), controlplanev1.BootstrapReadyCondition)
		g.Expect(c.Message).To(ContainSubstring("the kubeconfig Secret of Cluster " + name + ": the kubeconfig is refused: " +
			"users[u].user.exec: an exec plugin would run a command in the hub's process"))
	}).Should(Succeed())
	g.Expect(marker).NotTo(BeAnExistingFile())
}

// TestControlPlanePushesConfigInputs: the control plane writes what a
// config needs into the spec of each OpenShiftConfig it creates — for the
// bootstrap node a Secret with the install-config without pull secret and
// BMC credentials (parsed and written again) and the pull secret beside it,
// the install state, the manifests selector and the release; for every
// machine the machine-config-server host api-int.<cluster>.<baseDomain>.
// An install-config that does not validate stops it before any Machine,
// with a condition naming the Secret and the field.
func TestControlPlanePushesConfigInputs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var icName string
	var good []byte
	name, _ := applyInstall(t, &fakeWorkload{}, func(o client.Object) {
		if cp, ok := o.(*controlplanev1.OpenShiftControlPlane); ok {
			cp.Labels = map[string]string{shard.Label: "a"}
		}
		if s, ok := o.(*corev1.Secret); ok && s.Data[controlplanev1.InstallConfigKey] != nil {
			icName, good = s.Name, s.Data[controlplanev1.InstallConfigKey]
			s.Data[controlplanev1.InstallConfigKey] = []byte(strings.Replace(string(good), "baseDomain: example.com", "baseDomain: ''", 1))
		}
	})
	ns := name
	g.Expect(icName).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		c := conditionOf(g, controlPlane(g, ns, name), controlplanev1.BootstrapReadyCondition)
		g.Expect(c.Reason).To(Equal(controlplanev1.InvalidInstallConfigReason))
		g.Expect(c.Message).To(ContainSubstring("Secret " + icName))
		g.Expect(c.Message).To(ContainSubstring("spec.installConfigRef"))
		g.Expect(c.Message).To(ContainSubstring("baseDomain"))
	}).Should(Succeed())
	g.Expect(ownedMachines(g, controlPlane(g, ns, name))).To(BeEmpty(), "no Machine from an install-config that does not validate")
	g.Expect(conditionOf(g, controlPlane(g, ns, name), controlplanev1.MachinesCreatedCondition)).To(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Reason", controlplanev1.InvalidInstallConfigReason)))

	ic := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: icName}, ic)).To(Succeed())
	ic.Data[controlplanev1.InstallConfigKey] = good
	g.Expect(env.Client.Update(ctx, ic)).To(Succeed())

	cfg := &bootstrapv1.OpenShiftConfig{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-bootstrap"}, cfg)
	}, "40s").Should(Succeed(), "the control plane looks at the install-config again and creates the bootstrap Machine")
	cp := controlPlane(g, ns, name)
	g.Expect(cfg.Spec.Role).To(Equal(bootstrapv1.RoleBootstrap))
	g.Expect(cfg.Labels).To(HaveKeyWithValue(shard.Label, "a"), "the control plane's shard reconciles its Machines")
	g.Expect(cfg.Spec.MachineConfigServerHost).To(Equal("api-int." + name + ".example.com"))
	g.Expect(cfg.Spec.Bootstrap).To(Equal(&bootstrapv1.BootstrapInputs{
		InstallConfigRef:  bootstrapv1.SecretReference{Name: name + "-bootstrap-install-config"},
		InstallStateRef:   bootstrapv1.SecretReference{Name: cp.Spec.InstallStateRef.Name},
		ManifestsSelector: cp.Spec.ManifestsSelector,
		ReleaseVersion:    cp.Spec.DistributionVersion,
	}))

	pushed := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cfg.Spec.Bootstrap.InstallConfigRef.Name}, pushed)).To(Succeed())
	g.Expect(metav1.IsControlledBy(pushed, cp)).To(BeTrue(), "deleted with the control plane")
	g.Expect(string(pushed.Data[bootstrapv1.PullSecretKey])).To(Equal(`{"auths":{}}`))
	sanitized, err := installconfig.Parse(pushed.Data[bootstrapv1.InstallConfigKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sanitized.PullSecret).To(BeEmpty())
	g.Expect(sanitized.Platform.BareMetal.Hosts).To(HaveLen(4))
	for _, h := range sanitized.Platform.BareMetal.Hosts {
		g.Expect(h.BMC.Username+h.BMC.Password).To(BeEmpty(), "no BMC credentials for host %s", h.Name)
		g.Expect(h.BMC.Address).NotTo(BeEmpty())
	}
}

// TestPausedControlPlane: a paused control plane says so in its Paused
// condition and creates nothing; resumed, it goes on, and its
// observedGeneration follows the spec once a reconcile succeeded.
func TestPausedControlPlane(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name, _ := applyInstall(t, &fakeWorkload{}, func(o client.Object) {
		if cp, ok := o.(*controlplanev1.OpenShiftControlPlane); ok {
			cp.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
		}
	})
	ns := name
	g.Eventually(func(g Gomega) {
		c := conditionOf(g, controlPlane(g, ns, name), clusterv1.PausedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(Equal("OpenShiftControlPlane has the cluster.x-k8s.io/paused annotation"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(ownedMachines(g, controlPlane(g, ns, name))).To(BeEmpty())
	}, "3s").Should(Succeed(), "a paused control plane creates no Machine")
	g.Expect(controlPlane(g, ns, name).Status.ObservedGeneration).To(BeZero())

	g.Eventually(func() error {
		cp := controlPlane(g, ns, name)
		delete(cp.Annotations, clusterv1.PausedAnnotation)
		return env.Client.Update(ctx, cp)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cp := controlPlane(g, ns, name)
		g.Expect(conditionOf(g, cp, clusterv1.PausedCondition).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ownedMachines(g, cp)).To(HaveKey(name + "-bootstrap"))
		g.Expect(cp.Status.ObservedGeneration).To(Equal(cp.Generation))
	}).Should(Succeed())
}
