package cloudnode_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/infrastructure/equinix/cloudnode"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
	"github.com/metalshift/metalshift/internal/testenv"
	simequinix "github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/fault"
)

// env's kube-apiserver stands in for the installed cluster: the tests
// create its Nodes as kubelets would, and run the controller against it.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

// cloud is the emulated API on a fake clock: devices change state only
// when the test steps it.
type cloud struct {
	s       *simequinix.Server
	clock   *clocktesting.FakeClock
	api     *metalclient.Client
	project string
	faults  *fault.Plan
	// suffix makes the test's hostnames (and so its Nodes' names) its
	// own, run after run.
	suffix string
}

func newCloud(t *testing.T, faults string) *cloud {
	t.Helper()
	c := &cloud{clock: clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	opts := simequinix.Options{Clock: c.clock}
	if faults != "" {
		c.faults = fault.MustParse(faults)
		opts.Faults = c.faults
	}
	c.s = simequinix.New(opts)
	srv := httptest.NewServer(c.s.Handler())
	t.Cleanup(srv.Close)
	token := c.s.NewToken()
	p, err := c.s.CreateProject(token, "installed")
	if err != nil {
		t.Fatal(err)
	}
	c.project = p.ID
	if c.api, err = metalclient.New(metalclient.Options{BaseURL: srv.URL + equinixapi.APIPrefix, Token: token}); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	c.suffix = hex.EncodeToString(b)
	return c
}

// call runs one of the test's own calls of the API, asked again after a
// fault the test's plan made (the emulator does nothing on a faulted call).
func (c *cloud) call(g Gomega, f func() error) {
	g.Eventually(func() error {
		err := f()
		if metalclient.IsServerError(err) && c.faults != nil {
			return err
		}
		g.Expect(err).NotTo(HaveOccurred())
		return nil
	}).Should(Succeed())
}

// device creates a device named hostname-<suffix> and steps the clock to
// make it active.
func (c *cloud) device(g Gomega, hostname string, tags ...string) *equinixapi.Device {
	var d *equinixapi.Device
	c.call(g, func() (err error) {
		d, err = c.api.CreateDevice(context.Background(), c.project, equinixapi.DeviceCreateInput{
			Metro: "da", Plan: "c3.small.x86", OperatingSystem: "ubuntu_24_04", Hostname: hostname + "-" + c.suffix, Tags: tags})
		return err
	})
	c.clock.Step(simequinix.DefaultTimings.Queued)
	c.clock.Step(simequinix.DefaultTimings.Provisioning)
	c.call(g, func() (err error) {
		d, err = c.api.GetDevice(context.Background(), d.ID)
		return err
	})
	g.Expect(d.State).To(Equal(equinixapi.StateActive))
	return d
}

// start runs the controller (Run, as a process would) until the test
// ends, after which the test's Nodes are deleted.
func start(t *testing.T, c *cloud, o cloudnode.Options) {
	t.Helper()
	o.Config, o.API, o.ProjectID = env.Config, c.api, c.project
	if o.ResyncInterval == 0 {
		o.ResyncInterval = 200 * time.Millisecond
	}
	o.RetryInterval = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cloudnode.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the controller stopped with an error: %v", err)
		}
		nodes := &corev1.NodeList{}
		if err := env.Client.List(context.Background(), nodes); err != nil {
			t.Error(err)
			return
		}
		for _, n := range nodes.Items {
			_ = env.Client.Delete(context.Background(), &n)
		}
	})
}

var uninitialized = corev1.Taint{Key: cloudnode.UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// node registers a Node as a kubelet with --cloud-provider=external does:
// the uninitialized taint, the providerID the kubelet was given (if any).
func node(g Gomega, name, providerID string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec: corev1.NodeSpec{ProviderID: providerID, Taints: []corev1.Taint{uninitialized}}}
	g.Expect(env.Client.Create(context.Background(), n)).To(Succeed())
	return n
}

func get(g Gomega, n *corev1.Node) {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n)).To(Succeed())
}

func gone(g Gomega, n *corev1.Node) {
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(n), &corev1.Node{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Node %s is still there: %v", n.Name, err)
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// taints are a Node's but the not-ready taint, which the kube-apiserver's
// admission (TaintNodesByCondition) puts on every new Node.
func taints(n *corev1.Node) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
}

func setReady(g Gomega, n *corev1.Node, status corev1.ConditionStatus) {
	get(g, n)
	before := n.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	g.Expect(env.Client.Status().Patch(context.Background(), n, client.MergeFrom(before))).To(Succeed())
}

// TestNodeInitialized: a Node named as a device, without providerID, gets
// the device's providerID, addresses and labels and loses the uninitialized
// taint, keeping the others; a Node whose kubelet set the providerID (from
// the config drive) keeps it and gets its device's addresses. With the
// cluster tag, a device of another cluster with the Node's hostname is not
// its device.
func TestNodeInitialized(t *testing.T) {
	g := NewWithT(t)
	c := newCloud(t, "")
	const tag = "metalshift.io/cluster=ns/c1"
	d := c.device(g, "worker-0", tag)
	d2 := c.device(g, "worker-1", tag)
	other := c.device(g, "worker-2", "metalshift.io/cluster=ns/c2")
	// Two devices of the cluster with one hostname: their Node is matched
	// to neither.
	other2 := c.device(g, "worker-2", tag)
	third := c.device(g, "worker-2", tag)
	g.Expect([]string{other2.Hostname, third.Hostname}).To(Equal([]string{other.Hostname, other.Hostname}))
	// An elastic IP on the first device: the cluster's, not the Node's.
	res, err := c.api.RequestIPReservation(context.Background(), c.project, equinixapi.IPReservationRequest{
		Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: "da", Tags: []string{tag}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.api.AssignIP(context.Background(), d.ID, res.Address)
	g.Expect(err).NotTo(HaveOccurred())
	start(t, c, cloudnode.Options{ClusterTag: tag})

	n := node(g, d.Hostname, "")
	custom := corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	n.Spec.Taints = append(n.Spec.Taints, custom)
	g.Expect(env.Client.Update(context.Background(), n)).To(Succeed())
	n2 := node(g, "kubelet-named-"+c.suffix, cloudnode.ProviderIDPrefix+d2.ID)
	n3 := node(g, other.Hostname, "")

	var want []corev1.NodeAddress
	for _, a := range d.IPAddresses {
		typ := corev1.NodeInternalIP
		if a.Public {
			typ = corev1.NodeExternalIP
		}
		want = append(want, corev1.NodeAddress{Type: typ, Address: a.Address})
	}
	g.Expect(want).To(HaveLen(3), "private and public IPv4, public IPv6")
	elastic, err := c.api.GetDevice(context.Background(), d.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(elastic.IPAddresses).To(ContainElement(HaveField("Address", res.Address)), "the elastic IP is on the device")
	g.Eventually(func(g Gomega) {
		get(g, n)
		g.Expect(n.Spec.ProviderID).To(Equal("equinixmetal://" + d.ID))
		g.Expect(taints(n)).To(Equal([]corev1.Taint{custom}))
		g.Expect(n.Status.Addresses).To(ConsistOf(append(want, corev1.NodeAddress{Type: corev1.NodeHostName, Address: d.Hostname})))
		g.Expect(n.Status.Addresses[0].Type).To(Equal(corev1.NodeInternalIP), "the private address first")
		g.Expect(n.Labels).To(Equal(map[string]string{"kubernetes.io/hostname": d.Hostname,
			cloudnode.InstanceTypeLabel: "c3.small.x86", cloudnode.RegionLabel: "da", cloudnode.ZoneLabel: d.Facility.Code}))
	}).Should(Succeed())

	g.Eventually(func(g Gomega) {
		get(g, n2)
		g.Expect(n2.Spec.ProviderID).To(Equal("equinixmetal://" + d2.ID))
		g.Expect(taints(n2)).To(BeEmpty())
		g.Expect(n2.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeHostName, Address: d2.Hostname}))
		g.Expect(n2.Status.Addresses).To(HaveLen(4))
	}).Should(Succeed())

	// The third Node is looked up by hostname at each resync, and left
	// as it is while two devices of the cluster have its hostname.
	lists := func() int { return c.s.Requests()["GET /metal/v1/projects/{id}/devices"] }
	seen := lists()
	g.Eventually(lists).Should(BeNumerically(">=", seen+3))
	get(g, n3)
	g.Expect(n3.Spec.ProviderID).To(BeEmpty())
	g.Expect(taints(n3)).To(Equal([]corev1.Taint{uninitialized}))
	g.Expect(n3.Status.Addresses).To(BeEmpty())
	// One of them going, the Node is the other's.
	g.Expect(c.api.DeleteDevice(context.Background(), other2.ID, false)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, n3)
		g.Expect(n3.Spec.ProviderID).To(Equal("equinixmetal://"+third.ID), "the cluster's device, not the other cluster's %s", other.ID)
		g.Expect(taints(n3)).To(BeEmpty())
	}).Should(Succeed())
}

// TestNodeShutdown: a device powered off taints its Node with shutdown
// (NoSchedule); the taint goes once the device is on again. The Node is
// not deleted.
func TestNodeShutdown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newCloud(t, "")
	d := c.device(g, "worker-0")
	start(t, c, cloudnode.Options{})
	n := node(g, d.Hostname, "")
	g.Eventually(func(g Gomega) {
		get(g, n)
		g.Expect(taints(n)).To(BeEmpty())
		g.Expect(n.Spec.ProviderID).NotTo(BeEmpty())
	}).Should(Succeed())

	g.Expect(c.api.PowerOff(ctx, d.ID)).To(Succeed())
	c.clock.Step(simequinix.DefaultTimings.Power)
	g.Eventually(func(g Gomega) {
		get(g, n)
		g.Expect(taints(n)).To(Equal([]corev1.Taint{{Key: cloudnode.ShutdownTaint, Effect: corev1.TaintEffectNoSchedule}}))
	}).Should(Succeed())
	got, err := c.api.GetDevice(ctx, d.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.State).To(Equal(equinixapi.StateInactive))

	g.Expect(c.api.PowerOn(ctx, d.ID)).To(Succeed())
	c.clock.Step(simequinix.DefaultTimings.Power)
	g.Eventually(func(g Gomega) {
		get(g, n)
		g.Expect(hasTaint(n, cloudnode.ShutdownTaint)).To(BeFalse())
	}).Should(Succeed())
	get(g, n)
	g.Expect(n.Spec.ProviderID).To(Equal("equinixmetal://" + d.ID))
}

// TestNodeOfGoneDeviceDeleted: the Node of a device being deleted
// (deprovisioning: a delete is not undone) is deleted while the device is
// still listed; so is a Node whose providerID names a device the API does
// not know. A Node that is Ready is kept (an event says why) until it is
// not.
func TestNodeOfGoneDeviceDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newCloud(t, "")
	d := c.device(g, "worker-0")
	start(t, c, cloudnode.Options{})
	n := node(g, d.Hostname, "")
	g.Eventually(func(g Gomega) {
		get(g, n)
		g.Expect(n.Spec.ProviderID).To(Equal("equinixmetal://" + d.ID))
	}).Should(Succeed())

	g.Expect(c.api.DeleteDevice(ctx, d.ID, false)).To(Succeed())
	g.Eventually(gone).WithArguments(n).Should(Succeed())
	got, err := c.api.GetDevice(ctx, d.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.State).To(Equal(equinixapi.StateDeprovisioning), "the clock was not stepped: the device is still deprovisioning")

	unknown := node(g, "unknown-"+c.suffix, "equinixmetal://6d1c0d3f-0000-4000-8000-"+c.suffix+"000000")
	g.Eventually(gone).WithArguments(unknown).Should(Succeed())

	// A Ready Node is believed over the API until it is not Ready.
	d2 := c.device(g, "worker-1")
	readyNode := node(g, d2.Hostname, cloudnode.ProviderIDPrefix+d2.ID)
	g.Eventually(func(g Gomega) {
		get(g, readyNode)
		g.Expect(taints(readyNode)).To(BeEmpty())
	}).Should(Succeed())
	setReady(g, readyNode, corev1.ConditionTrue)
	g.Expect(c.api.DeleteDevice(ctx, d2.ID, false)).To(Succeed())
	g.Eventually(func(g Gomega) {
		evs := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, evs)).To(Succeed())
		g.Expect(slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Name == readyNode.Name && e.Reason == "DeviceGone"
		})).To(BeTrue())
	}).Should(Succeed())
	get(g, readyNode)
	g.Expect(readyNode.DeletionTimestamp).To(BeNil())
	setReady(g, readyNode, corev1.ConditionUnknown)
	g.Eventually(gone).WithArguments(readyNode).Should(Succeed())
}

// TestOtherCloudsNodeUntouched: a Node with another cloud's providerID,
// named as a device of the project, is left as it is: its providerID, its
// uninitialized taint, no addresses.
func TestOtherCloudsNodeUntouched(t *testing.T) {
	g := NewWithT(t)
	c := newCloud(t, "")
	d := c.device(g, "worker-0")
	d2 := c.device(g, "worker-1")
	start(t, c, cloudnode.Options{})
	foreign := node(g, d.Hostname, "aws:///us-east-1a/i-0123456789abcdef0")
	rv := foreign.ResourceVersion
	// A Node of this cloud registered after it: once it is initialized,
	// the controller (one worker, its queue in order) has seen the
	// foreign Node too.
	n := node(g, d2.Hostname, "")
	g.Eventually(func(g Gomega) {
		get(g, n)
		g.Expect(n.Spec.ProviderID).To(Equal("equinixmetal://" + d2.ID))
		g.Expect(n.Status.Addresses).NotTo(BeEmpty())
	}).Should(Succeed())
	// And over some resyncs of the other Node (a device read each).
	reads := func() int { return c.s.Requests()["GET /metal/v1/devices/{id}"] }
	seen := reads()
	g.Eventually(reads).Should(BeNumerically(">=", seen+3))
	get(g, foreign)
	g.Expect(foreign.ResourceVersion).To(Equal(rv))
	g.Expect(foreign.Spec.ProviderID).To(Equal("aws:///us-east-1a/i-0123456789abcdef0"))
	g.Expect(taints(foreign)).To(Equal([]corev1.Taint{uninitialized}))
	g.Expect(foreign.Status.Addresses).To(BeEmpty())
}

// TestServerErrorsDeleteNothing: with 10 % of the API's answers 503,
// every Node is initialized, and over many resyncs, each faulted call
// among them, no Node is deleted nor changed.
func TestServerErrorsDeleteNothing(t *testing.T) {
	g := NewWithT(t)
	c := newCloud(t, "seed=11,equinix.5xx=10%:503")
	var nodes []*corev1.Node
	var devices []*equinixapi.Device
	for _, h := range []string{"master-0", "master-1", "worker-0"} {
		devices = append(devices, c.device(g, h))
	}
	start(t, c, cloudnode.Options{})
	for _, d := range devices {
		nodes = append(nodes, node(g, d.Hostname, ""))
	}
	for i, n := range nodes {
		g.Eventually(func(g Gomega) {
			get(g, n)
			g.Expect(n.Spec.ProviderID).To(Equal("equinixmetal://" + devices[i].ID))
			g.Expect(taints(n)).To(BeEmpty())
			g.Expect(n.Status.Addresses).To(HaveLen(4))
		}).Should(Succeed())
	}
	fired := c.faults.Fired(fault.Equinix5xx)
	g.Eventually(func(g Gomega) {
		for _, n := range nodes {
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(n), &corev1.Node{}); apierrors.IsNotFound(err) {
				StopTrying("Node " + n.Name + " was deleted on an error of the API").Now()
			}
		}
		g.Expect(c.faults.Fired(fault.Equinix5xx)).To(BeNumerically(">=", fired+10), "faults among the device reads of the resyncs")
	}).Should(Succeed())
	for i, n := range nodes {
		rv := n.ResourceVersion
		get(g, n)
		g.Expect(n.Spec.ProviderID).To(Equal("equinixmetal://" + devices[i].ID))
		g.Expect(n.ResourceVersion).To(Equal(rv), "Node %s unchanged", n.Name)
	}
}
