package provisioning_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/metal3"
	"github.com/metalshift/metalshift/clusterbaremetal/reconcilers/provisioning"
)

// TestPlatforms: the upstream platform table. Off the supported platforms
// the operator reports Disabled=True (Available, not Progressing, not
// Degraded) and deploys nothing, even with a Provisioning; on the others
// the webhook admits exactly the platform's provisioning-network modes.
func TestPlatforms(t *testing.T) {
	reset(t, configv1.BareMetalPlatformType)
	runOperator(t, "4.20.0")
	ctx := context.Background()
	all := []metal3v1.ProvisioningNetwork{metal3v1.ProvisioningNetworkManaged, metal3v1.ProvisioningNetworkUnmanaged, metal3v1.ProvisioningNetworkDisabled}
	disabledOnly := []metal3v1.ProvisioningNetwork{metal3v1.ProvisioningNetworkDisabled}
	for _, tc := range []struct {
		platform configv1.PlatformType
		modes    []metal3v1.ProvisioningNetwork // nil: the operator is disabled
	}{
		{configv1.BareMetalPlatformType, all},
		{configv1.NonePlatformType, all},
		{configv1.OpenStackPlatformType, disabledOnly},
		{configv1.VSpherePlatformType, disabledOnly},
		{configv1.AWSPlatformType, disabledOnly},
		{configv1.AzurePlatformType, disabledOnly},
		{configv1.GCPPlatformType, disabledOnly},
		{configv1.KubevirtPlatformType, disabledOnly},
		{configv1.EquinixMetalPlatformType, nil},
		{configv1.ExternalPlatformType, nil},
		{configv1.NutanixPlatformType, nil},
		{configv1.PowerVSPlatformType, nil},
		{configv1.IBMCloudPlatformType, nil},
		{"", nil},
	} {
		t.Run(string(tc.platform), func(t *testing.T) {
			g := NewWithT(t)
			setPlatform(t, tc.platform)
			if tc.modes == nil {
				g.Eventually(clusterOperator).Should(Equal(map[string]string{
					"Disabled":    "True UnsupportedPlatform: Nothing to do on this Platform",
					"Available":   "True AsExpected: Operational",
					"Progressing": "False : ",
					"Degraded":    "False : ",
					"Upgradeable": "True : ",
				}))
				g.Expect(operatorVersion(g)).To(Equal("4.20.0"))
				// Nothing else: whatever the Provisioning, no Deployment, no finalizer.
				prov := newProvisioning(metal3v1.ProvisioningSpec{ProvisioningIP: "bogus"})
				g.Expect(env.Client.Create(ctx, prov)).To(Succeed())
				g.Consistently(func() bool {
					return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: metal3.Namespace, Name: metal3.DeploymentName}, &appsv1.Deployment{}))
				}, "300ms").Should(BeTrue())
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov)).To(Succeed())
				g.Expect(prov.Finalizers).To(BeEmpty())
				g.Expect(env.Client.Delete(ctx, prov)).To(Succeed())
				g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov)) }).Should(BeTrue())
				return
			}
			g.Eventually(clusterOperator).Should(And(
				HaveKeyWithValue("Disabled", "False : "),
				HaveKeyWithValue("Available", "True WaitingForProvisioningCR: Waiting for Provisioning CR")))
			for _, mode := range all {
				spec := metal3v1.ProvisioningSpec{ProvisioningNetwork: mode}
				if mode != metal3v1.ProvisioningNetworkDisabled {
					spec = validManaged()
					spec.ProvisioningNetwork = mode
				}
				err := env.Client.Create(ctx, newProvisioning(spec), client.DryRunAll)
				if containsMode(tc.modes, mode) {
					g.Expect(err).NotTo(HaveOccurred(), "%s on %s", mode, tc.platform)
				} else {
					g.Expect(err).To(MatchError(ContainSubstring("ProvisioningNetwork "+string(mode)+" is not supported")), "%s on %s", mode, tc.platform)
				}
			}
		})
	}
}

func containsMode(modes []metal3v1.ProvisioningNetwork, m metal3v1.ProvisioningNetwork) bool {
	for _, x := range modes {
		if x == m {
			return true
		}
	}
	return false
}

// TestOwnershipHandover: a metal3 Deployment of another owner (neither
// the baremetal.openshift.io/owned annotation nor the machine-api
// operator's) is left as it is while the operator reports that it waits;
// once its owner adds the annotation the operator takes it over (here
// replacing it: its selector was not ours) and reports it as it rolls out.
func TestOwnershipHandover(t *testing.T) {
	reset(t, configv1.BareMetalPlatformType)
	ctx := context.Background()
	g := NewWithT(t)
	legacy := map[string]string{"app": "someone-elses-metal3"}
	theirs := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: metal3.Namespace, Name: metal3.DeploymentName,
			Annotations: map[string]string{"example.com/owner": "someone"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: legacy},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: legacy},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "metal3-ironic", Image: "example.com/ironic:old"}}}},
		},
	}
	g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())
	g.Expect(env.Client.Create(ctx, newProvisioning(validManaged()))).To(Succeed())
	runOperator(t, "4.20.0")

	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Progressing",
		"True SyncingResources: metal3 deployment is held by another owner (not the machine-api operator): waiting for it to hand it over with the annotation baremetal.openshift.io/owned"))
	g.Consistently(func(g Gomega) types {
		d := deployment(g)
		_, owned := d.Annotations[metal3.OwnedAnnotation]
		return types{d.UID, d.Generation, d.Spec.Template.Spec.Containers[0].Image, owned}
	}, "500ms").Should(Equal(types{theirs.UID, theirs.Generation, "example.com/ironic:old", false}))
	g.Expect(claimEvents(g, theirs.UID)).To(BeEmpty())

	// The other owner hands over.
	g.Eventually(func() error {
		d := deployment(g)
		delete(d.Annotations, "example.com/owner")
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, metal3.OwnedAnnotation, "")
		return env.Client.Update(ctx, d)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		d := deployment(g)
		g.Expect(d.UID).NotTo(Equal(theirs.UID))
		g.Expect(d.Spec.Selector.MatchLabels).To(Equal(metal3.Labels))
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("example.com/metalshift/manager:4.20.0"))
		g.Expect(d.OwnerReferences).To(ContainElement(HaveField("Name", metal3v1.ProvisioningSingletonName)))
	}).Should(Succeed())
	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Progressing", "True SyncingResources: Applying metal3 resources"))
	markRolledOut(t)
	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Available", "True DeployComplete: metal3 pod is running"))
}

// TestClaimMachineAPIDeployment: the metal3 Deployment the machine-api
// operator leaves on an upgraded cluster (its ownership annotation and
// labels, no baremetal.openshift.io/owned) is claimed without waiting:
// the operator records an Event, sets its annotation, renders its spec
// (replacing the Deployment, whose selector was the machine-api
// operator's) and reports Available once it rolls out.
func TestClaimMachineAPIDeployment(t *testing.T) {
	reset(t, configv1.BareMetalPlatformType)
	ctx := context.Background()
	g := NewWithT(t)
	maoLabels := map[string]string{"api": "clusterapi", "k8s-app": "controller"}
	left := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: metal3.Namespace, Name: metal3.DeploymentName,
			Annotations: map[string]string{"machine.openshift.io/owned": ""}, Labels: maoLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: maoLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: maoLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "metal3-ironic", Image: "example.com/ironic:old"}}}},
		},
	}
	g.Expect(env.Client.Create(ctx, left)).To(Succeed())
	g.Expect(env.Client.Create(ctx, newProvisioning(validManaged()))).To(Succeed())
	runOperator(t, "4.20.0")

	g.Eventually(func(g Gomega) []string { return claimEvents(g, left.UID) }).Should(ConsistOf(
		"Normal ClaimedDeployment: claimed the openshift-machine-api/metal3 Deployment the machine-api operator left"))
	g.Eventually(func(g Gomega) {
		d := deployment(g)
		g.Expect(d.UID).NotTo(Equal(left.UID))
		g.Expect(d.Annotations).To(HaveKeyWithValue(metal3.OwnedAnnotation, ""))
		g.Expect(d.Annotations).NotTo(HaveKey("machine.openshift.io/owned"))
		g.Expect(d.Spec.Selector.MatchLabels).To(Equal(metal3.Labels))
		g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("example.com/metalshift/manager:4.20.0"))
		g.Expect(d.OwnerReferences).To(ContainElement(HaveField("Name", metal3v1.ProvisioningSingletonName)))
	}).Should(Succeed())
	markRolledOut(t)
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "True DeployComplete: metal3 pod is running"),
		HaveKeyWithValue("Progressing", "False DeployComplete: "),
		HaveKeyWithValue("Degraded", "False : ")))
}

// claimEvents returns the claim Events about the Deployment of uid, as
// "type reason: note".
func claimEvents(g Gomega, uid apitypes.UID) []string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list)).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Reason == provisioning.ReasonClaimed && e.Related != nil && e.Related.UID == uid {
			out = append(out, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	return out
}

type types struct {
	UID        any
	Generation int64
	Image      string
	Owned      bool
}

// TestOperandUpgrade: the operator is replaced by one of a new version (a
// new --baremetal-operator-version): it rolls the metal3 Deployment and
// reports Progressing "Operator upgraded", still at the old version, until
// the Deployment is available again; then the new version.
func TestOperandUpgrade(t *testing.T) {
	reset(t, configv1.BareMetalPlatformType)
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, newProvisioning(validManaged()))).To(Succeed())
	stop := runOperator(t, "4.20.0")
	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Progressing", "True SyncingResources: Applying metal3 resources"))
	g.Expect(operatorVersion(g)).To(BeEmpty(), "no version before the operand first rolls out")
	markRolledOut(t)
	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Available", "True DeployComplete: metal3 pod is running"))
	g.Expect(operatorVersion(g)).To(Equal("4.20.0"))
	before := deployment(g)
	stop()

	runOperator(t, "4.21.0")
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "True SyncingResources: "),
		HaveKeyWithValue("Progressing", "True SyncingResources: Operator upgraded")))
	g.Expect(operatorVersion(g)).To(Equal("4.20.0"))
	var after *appsv1.Deployment
	g.Eventually(func(g Gomega) {
		after = deployment(g)
		g.Expect(after.UID).To(Equal(before.UID))
		g.Expect(after.Generation).To(BeNumerically(">", before.Generation))
		g.Expect(after.Spec.Template.Annotations).To(HaveKeyWithValue(metal3.VersionAnnotation, "4.21.0"))
		g.Expect(after.Spec.Template.Spec.Containers[0].Image).To(Equal("example.com/metalshift/manager:4.21.0"))
	}).Should(Succeed())

	markRolledOut(t)
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "True DeployComplete: metal3 pod is running"),
		HaveKeyWithValue("Progressing", "False DeployComplete: ")))
	g.Expect(operatorVersion(g)).To(Equal("4.21.0"))
}

// TestDeployServerCertificate: the operator serves its operand's deploy
// server over https: it makes the CA once, issues the certificate for the
// provisioning address and the control-plane nodes' addresses (not the
// workers'), mounts it (never the CA's key), and issues it again when a
// control-plane node's addresses change, when it is due for renewal, and
// when someone replaced it, always from the same CA.
func TestDeployServerCertificate(t *testing.T) {
	reset(t, configv1.BareMetalPlatformType)
	ctx := context.Background()
	g := NewWithT(t)
	master := addNode(t, "master-0", true, "192.168.111.20")
	addNode(t, "worker-0", false, "192.168.111.30")
	g.Expect(env.Client.Create(ctx, newProvisioning(validManaged()))).To(Succeed())
	runOperator(t, "4.20.0")

	secret := func(g Gomega, name string) map[string][]byte {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: metal3.Namespace, Name: name}, s)).To(Succeed())
		return s.Data
	}
	// servedIPs verifies the certificate as a host holding the CA would,
	// and returns its addresses and serial.
	servedIPs := func(g Gomega) (ips []string, serial string) {
		ca, data := secret(g, metal3.DeployCASecret), secret(g, metal3.DeployTLSSecret)
		g.Expect(data[metal3.CAKey]).To(Equal(ca[corev1.TLSCertKey]), "hosts are handed the operator's CA")
		pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
		g.Expect(err).NotTo(HaveOccurred())
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		g.Expect(err).NotTo(HaveOccurred())
		roots := x509.NewCertPool()
		g.Expect(roots.AppendCertsFromPEM(data[metal3.CAKey])).To(BeTrue())
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "172.22.0.3", CurrentTime: clk.Now()})
		g.Expect(err).NotTo(HaveOccurred())
		for _, ip := range leaf.IPAddresses {
			ips = append(ips, ip.String())
		}
		return ips, leaf.SerialNumber.String()
	}
	var serial string
	g.Eventually(func(g Gomega) []string {
		ips, s := servedIPs(g)
		serial = s
		return ips
	}).Should(ConsistOf("172.22.0.3", "192.168.111.20"))
	caCert := secret(g, metal3.DeployCASecret)[corev1.TLSCertKey]

	// The operator writes the certificate's Secrets before the Deployment
	// that mounts them: the Deployment may not be there yet.
	g.Eventually(func(g Gomega) {
		d := deployment(g)
		c := d.Spec.Template.Spec.Containers[0]
		g.Expect(c.Args).To(ContainElements("--deploy-url=https://172.22.0.3:6183", "--deploy-cert-file=/etc/metalshift/tls/tls.crt"))
		g.Expect(c.Args).NotTo(ContainElement(ContainSubstring("insecure")))
		g.Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", metal3.DeployTLSSecret)))
		g.Expect(d.Spec.Template.Spec.Volumes).NotTo(ContainElement(HaveField("Secret.SecretName", metal3.DeployCASecret)))
	}).Should(Succeed())

	// A control-plane node's new address: issued again, without a poke.
	master.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.111.25"}}
	g.Expect(env.Client.Status().Update(ctx, master)).To(Succeed())
	g.Eventually(func(g Gomega) []string { ips, _ := servedIPs(g); return ips }).Should(ConsistOf("172.22.0.3", "192.168.111.25"))

	// Due for renewal: issued again from the same CA.
	_, serial = servedIPs(g)
	clk.Step(metal3.CertLifetime * 2 / 3)
	poke(t)
	g.Eventually(func(g Gomega) string { _, s := servedIPs(g); return s }).ShouldNot(Equal(serial))

	// Replaced by someone else's certificate for the same addresses: the
	// operator issues its own again.
	other, err := metal3.NewDeployCA(clk.Now())
	g.Expect(err).NotTo(HaveOccurred())
	forged, err := metal3.IssueDeployTLS(other, []net.IP{net.ParseIP("172.22.0.3"), net.ParseIP("192.168.111.25")}, clk.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: metal3.Namespace, Name: metal3.DeployTLSSecret}, s); err != nil {
			return err
		}
		s.Data = forged
		return env.Client.Update(ctx, s)
	}).Should(Succeed())
	poke(t)
	g.Eventually(func(g Gomega) []string { ips, _ := servedIPs(g); return ips }).Should(ConsistOf("172.22.0.3", "192.168.111.25"))
	g.Expect(secret(g, metal3.DeployCASecret)[corev1.TLSCertKey]).To(Equal(caCert), "the CA is never replaced")
}

// addNode creates a Node with an internal address, deleted when the test
// ends.
func addNode(t *testing.T, name string, controlPlane bool, ip string) *corev1.Node {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if controlPlane {
		n.Labels[metal3.ControlPlaneLabel] = ""
	}
	g.Expect(env.Client.Create(ctx, n)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	g.Expect(env.Client.Status().Update(ctx, n)).To(Succeed())
	return n
}
