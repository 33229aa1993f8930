package equinix_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/infrastructure/equinix/cloudnode"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/cloudnodes"
	simequinix "github.com/metalshift/metalshift/sim/equinix"
)

// envKubeconfig is an admin kubeconfig of the test's API server, which
// stands for the installed cluster, at server (env's own address when
// empty).
func envKubeconfig(g Gomega, server string) []byte {
	cfg := env.Config
	if server == "" {
		server = cfg.Host
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["installed"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "installed", AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	data, err := clientcmd.Write(*kc)
	g.Expect(err).NotTo(HaveOccurred())
	return data
}

// kubeconfigSecret is Cluster API's <cluster>-kubeconfig Secret of c1.
func kubeconfigSecret(ns string, kc []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": kc}}
}

// controlPlaneInitialized sets what the control plane's provider would
// have Cluster API set on the Cluster.
func controlPlaneInitialized(g Gomega, cluster *clusterv1.Cluster) {
	g.Eventually(func(g Gomega) {
		get(g, cluster)
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
		g.Expect(env.Client.Status().Patch(context.Background(), cluster, patch)).To(Succeed())
	}).Should(Succeed())
}

// installedNode registers, in the installed cluster, the Node of a device
// named name of the cluster: a kubelet with --cloud-provider=external, its
// uninitialized taint. It is deleted when the test ends.
func installedNode(t *testing.T, g Gomega, c *cloudEnv, ns, name string) (*equinixapi.Device, *corev1.Node) {
	d, err := c.api.CreateDevice(context.Background(), c.project, equinixapi.DeviceCreateInput{
		Metro: "sv", Plan: "c3.small.x86", OperatingSystem: "custom_ipxe", IPXEScriptURL: "http://hub.example/boot.ipxe",
		Hostname: name, Tags: []string{infrav1.EquinixMetalClusterTag(ns, "c1")}})
	g.Expect(err).NotTo(HaveOccurred())
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: cloudnode.UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
	g.Expect(env.Client.Create(context.Background(), n)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	return d, n
}

// expectInitialized waits for the cloud-node controller to have tied n to
// device d.
func expectInitialized(g Gomega, n *corev1.Node, d *equinixapi.Device) {
	g.Eventually(func(g Gomega) {
		get(g, n)
		g.Expect(n.Spec.ProviderID).To(Equal(cloudnode.ProviderIDPrefix + d.ID))
		g.Expect(slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudnode.UninitializedTaint })).To(BeFalse(), "%v", n.Spec.Taints)
	}).WithTimeout(time.Minute).Should(Succeed())
}

// expectEvent waits for an Event of reason on the EquinixMetalCluster
// whose note contains note.
func expectEvent(g Gomega, emc *infrav1.EquinixMetalCluster, reason, note string) {
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(env.Client.List(context.Background(), events, client.InNamespace(emc.Namespace))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Kind == "EquinixMetalCluster" && e.Regarding.Name == emc.Name {
				notes = append(notes, e.Reason+": "+e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(And(HavePrefix(reason+": "), ContainSubstring(note))))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// TestCloudNodeFromHub: once the cluster's control plane is initialized,
// the hub runs the cloud-node controller against the installed cluster's
// API (here the test's own), with the key of the hub's credentials
// Secret: the Node of the cluster's device gets its providerID and loses
// the uninitialized taint. Deleting the EquinixMetalCluster stops the
// controller.
func TestCloudNodeFromHub(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCloud(t, simequinix.Options{})
	cluster, emc := newCluster(t, g, ns, c)
	g.Expect(env.Client.Create(ctx, kubeconfigSecret(ns, envKubeconfig(g, "")))).To(Succeed())
	d, n := installedNode(t, g, c, ns, ns+"-node-0")

	controlPlaneInitialized(g, cluster)
	expectInitialized(g, n, d)
	expectEvent(g, emc, cloudnodes.StartedReason, "Started the cloud-node controller against the cluster's API at "+env.Config.Host)

	g.Expect(env.Client.Delete(ctx, emc)).To(Succeed())
	expectEvent(g, emc, cloudnodes.StoppedReason, "the EquinixMetalCluster is being deleted")
	g.Eventually(func(g Gomega) { gone(g, emc) }).WithTimeout(time.Minute).Should(Succeed())
}

// TestCloudNodeUnreachable: a cluster whose kubeconfig names an API that
// cannot be reached is reported, and tried again; a corrected kubeconfig
// restarts the controller at once (not after its pause), which then
// initializes the Node.
func TestCloudNodeUnreachable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCloud(t, simequinix.Options{})
	cluster, emc := newCluster(t, g, ns, c)
	s := kubeconfigSecret(ns, envKubeconfig(g, "https://127.0.0.1:1"))
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	d, n := installedNode(t, g, c, ns, ns+"-node-0")

	controlPlaneInitialized(g, cluster)
	expectEvent(g, emc, cloudnodes.FailedReason, "reaching the cluster's API")

	s.Data["value"] = envKubeconfig(g, "")
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	expectEvent(g, emc, cloudnodes.StoppedReason, "changed")
	expectInitialized(g, n, d)

	// Not left running against the test's API, on an emulator that stops
	// with the test.
	g.Expect(env.Client.Delete(ctx, emc)).To(Succeed())
	expectEvent(g, emc, cloudnodes.StoppedReason, "the EquinixMetalCluster is being deleted")
}
