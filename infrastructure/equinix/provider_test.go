package equinix_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/equinix"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/cloud"
	"github.com/metalshift/metalshift/infrastructure/equinix/rfc2136/bindtest"
	"github.com/metalshift/metalshift/internal/testenv"
	simequinix "github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/fault"
)

var env *testenv.Env

// bootScript is the iPXE script the hub would serve for a machine.
func bootScript(_ context.Context, emm *infrav1.EquinixMetalMachine, _ *infrav1.EquinixMetalCluster) (string, error) {
	return "http://hub.example/boot/" + string(emm.UID) + ".ipxe", nil
}

// TestMain runs the provider's reconcilers, with the Cluster API core
// controllers, polling devices every 100 ms.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		CAPICore: true,
		Components: []component.Component{{Name: "equinix", Setup: func(ctx context.Context, hub *component.Hub) error {
			return equinix.Setup(ctx, hub.Manager, equinix.Options{PollInterval: 100 * time.Millisecond, BootScriptURL: bootScript,
				Cloud: cloud.Options{Driver: driver}})
		}}},
	}))
}

// cloudEnv is an emulator of the API, a key and a project.
type cloudEnv struct {
	s       *simequinix.Server
	url     string
	token   string
	project string
	api     *metalclient.Client
}

// fast are timings that let a device provision in about a second.
var fast = simequinix.Timings{Queued: 200 * time.Millisecond, Provisioning: 500 * time.Millisecond, Deprovisioning: 300 * time.Millisecond, Power: 100 * time.Millisecond}

func newCloud(t *testing.T, opts simequinix.Options) *cloudEnv {
	t.Helper()
	if opts.Timings == (simequinix.Timings{}) {
		opts.Timings = fast
	}
	s := simequinix.New(opts)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c := &cloudEnv{s: s, url: srv.URL + "/metal/v1", token: s.NewToken()}
	p, err := s.CreateProject(c.token, "test")
	if err != nil {
		t.Fatal(err)
	}
	c.project = p.ID
	if c.api, err = metalclient.New(metalclient.Options{BaseURL: c.url, Token: c.token}); err != nil {
		t.Fatal(err)
	}
	return c
}

// newCluster creates the credentials Secret, a Cluster and its
// EquinixMetalCluster in ns.
func newCluster(t *testing.T, g Gomega, ns string, c *cloudEnv, edits ...func(*infrav1.EquinixMetalCluster)) (*clusterv1.Cluster, *infrav1.EquinixMetalCluster) {
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metal-key"},
		Data: map[string][]byte{infrav1.EquinixMetalAPIKeyKey: []byte(c.token)}})).To(Succeed())
	emc := &infrav1.EquinixMetalCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
		Spec: infrav1.EquinixMetalClusterSpec{ProjectID: c.project, Metro: "sv", CredentialsRef: infrav1.SecretReference{Name: "metal-key"}, APIURL: c.url}}
	for _, edit := range edits {
		edit(emc)
	}
	g.Expect(env.Client.Create(ctx, emc)).To(Succeed())
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "EquinixMetalCluster", Name: "c1"},
	}}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	return cluster, emc
}

// newMachine creates a bootstrap Secret, an EquinixMetalMachine and the
// Machine on them, as a MachineSet would; a control-plane Machine (Cluster
// API holds workers until a control plane is initialized, and these tests
// run without one) unless the spec says otherwise.
func newMachine(t *testing.T, g Gomega, ns, name string, spec infrav1.EquinixMetalMachineSpec) (*clusterv1.Machine, *infrav1.EquinixMetalMachine) {
	ctx := context.Background()
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-bootstrap", Namespace: ns},
		Data: map[string][]byte{"value": []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,` + name + `"}}]}}`),
			"format": []byte("ignition")}}
	g.Expect(env.Client.Create(ctx, boot)).To(Succeed())
	if spec.Plan == "" {
		spec.Plan = "c3.small.x86"
	}
	spec.Image = &infrav1.Image{URL: "http://images.example/rhcos.raw", Checksum: "0123abcd", ChecksumType: "sha256"}
	emm := &infrav1.EquinixMetalMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}}, Spec: spec}
	g.Expect(env.Client.Create(ctx, emm)).To(Succeed())
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(boot.Name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "EquinixMetalMachine", Name: name}},
	}
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	return m, emm
}

func get(g Gomega, o client.Object) {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)).To(Succeed())
}

func gone(g Gomega, o client.Object) {
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s still there: %v", o.GetName(), err)
}

// TestMachineLifecycle: a cluster on the emulated cloud with 10 % of the
// API's answers 503 and a tight rate limit (429s). Its elastic IPs are
// reserved and tagged, the API's is the control-plane endpoint; the
// machine's device is created once, with the bootstrap data as user data,
// the hub's iPXE script, the ownership tags and the user's; the machine
// gets its providerID and addresses, and the API address goes onto its
// device. The API key is nowhere but its Secret. Deleting the Machine
// deletes the device and waits for it; deleting the Cluster releases the
// addresses: the ledger is empty.
func TestMachineLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCloud(t, simequinix.Options{Faults: fault.MustParse("seed=7,equinix.5xx=10%:503"), RateLimit: 40, RateWindow: time.Second})
	cluster, emc := newCluster(t, g, ns, c)
	machine, emm := newMachine(t, g, ns, "master-0", infrav1.EquinixMetalMachineSpec{Tags: []string{"team=metal", "cost-center=42"}})

	g.Eventually(func(g Gomega) {
		get(g, emc)
		g.Expect(conditions.IsTrue(emc, infrav1.EquinixMetalClusterReadyCondition)).To(BeTrue(), "%v", emc.Status.Conditions)
		g.Expect(emc.Status.APIIP).NotTo(BeNil())
		g.Expect(emc.Status.IngressIP).NotTo(BeNil())
		g.Expect(emc.Spec.ControlPlaneEndpoint).To(Equal(infrav1.APIEndpoint{Host: emc.Status.APIIP.Address, Port: 6443}))
		get(g, cluster)
		g.Expect(ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
		g.Expect(cluster.Spec.ControlPlaneEndpoint.Host).To(Equal(emc.Status.APIIP.Address))
	}).WithTimeout(time.Minute).Should(Succeed())

	g.Eventually(func(g Gomega) {
		get(g, emm)
		g.Expect(conditions.IsTrue(emm, infrav1.EquinixMetalMachineReadyCondition)).To(BeTrue(), "%v", emm.Status.Conditions)
		g.Expect(emm.Spec.ProviderID).To(Equal("equinixmetal://" + emm.Status.DeviceID))
		g.Expect(emm.Status.InstanceState).To(Equal("active"))
		get(g, machine)
		g.Expect(ptr.Deref(machine.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
	}).WithTimeout(time.Minute).Should(Succeed())

	// The test's reads count against the key's rate limit too: a 429 is
	// asked again once the window has passed.
	var d *equinixapi.Device
	g.Eventually(func() (err error) {
		d, err = c.api.GetDevice(ctx, emm.Status.DeviceID)
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(d.Tags).To(ConsistOf(infrav1.EquinixMetalClusterTag(ns, "c1"), infrav1.EquinixMetalMachineTagPrefix+string(emm.UID), "metalshift.io/role=control-plane", "team=metal", "cost-center=42"))
	g.Expect(d.IPXEScriptURL).To(Equal("http://hub.example/boot/" + string(emm.UID) + ".ipxe"))
	g.Expect(d.OperatingSystem.Slug).To(Equal("custom_ipxe"))
	g.Expect(d.Userdata).To(ContainSubstring(`"path":"/etc/hostname"`))
	g.Expect(d.Metro.Code).To(Equal("sv"))
	// The device's own addresses; the cluster's elastic IPs it holds are
	// not the machine's.
	var want []clusterv1.MachineAddress
	for _, a := range d.IPAddresses {
		if !a.Management {
			continue
		}
		typ := clusterv1.MachineInternalIP
		if a.Public {
			typ = clusterv1.MachineExternalIP
		}
		want = append(want, clusterv1.MachineAddress{Type: typ, Address: a.Address})
	}
	g.Expect(want).To(HaveLen(3), "private and public IPv4, public IPv6")
	g.Expect(emm.Status.Addresses).To(ConsistOf(append(want, clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: "master-0"})))

	// One device for the machine, whatever the API's errors; the API
	// address on it; the ingress's too (no worker yet).
	g.Eventually(func(g Gomega) {
		l := c.s.Ledger()
		g.Expect(l.Devices).To(HaveLen(1))
		g.Expect(l.IPReservations).To(HaveLen(2))
		for _, r := range l.IPReservations {
			g.Expect(r.Tags).To(ContainElement(infrav1.EquinixMetalClusterTag(ns, "c1")))
			g.Expect(r.Assignments).To(HaveLen(1))
			g.Expect(r.Assignments[0].Device).To(Equal(d.ID))
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The key is in its Secret only.
	g.Expect(d.Userdata + strings.Join(d.Tags, ",")).NotTo(ContainSubstring(c.token))
	for _, o := range []client.Object{emm, emc, machine, cluster} {
		get(g, o)
		data, err := json.Marshal(o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).NotTo(ContainSubstring(c.token))
	}

	g.Expect(env.Client.Delete(ctx, machine)).To(Succeed())
	g.Eventually(func(g Gomega) {
		gone(g, emm)
		g.Expect(c.s.Ledger().Devices).To(BeEmpty())
	}).WithTimeout(time.Minute).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		gone(g, emc)
		g.Expect(c.s.Ledger().Empty()).To(BeTrue(), "%+v", c.s.Ledger())
	}).WithTimeout(time.Minute).Should(Succeed())
}

// TestFailedDeviceReplaced: the machine's first device ends failed; the
// provider deletes it, says so, and the second device becomes the
// machine's.
func TestFailedDeviceReplaced(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	c := newCloud(t, simequinix.Options{Faults: fault.MustParse("equinix.failed[worker-f]=@1")})
	newCluster(t, g, ns, c)
	_, emm := newMachine(t, g, ns, "worker-f", infrav1.EquinixMetalMachineSpec{})
	g.Eventually(func(g Gomega) {
		get(g, emm)
		g.Expect(conditions.IsTrue(emm, infrav1.EquinixMetalMachineReadyCondition)).To(BeTrue(), "%v", emm.Status.Conditions)
		g.Expect(emm.Status.FailedDevices).To(Equal(int32(1)))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Eventually(func(g Gomega) {
		live := 0
		for _, d := range c.s.Ledger().Devices {
			if d.State != "deprovisioning" {
				live++
				g.Expect(d.ID).To(Equal(emm.Status.DeviceID))
			}
		}
		g.Expect(live).To(Equal(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// TestHardwareReservations: a list of reservation IDs is tried in order
// (the first is taken by another device), next-available takes a free
// one, and none free is a condition naming the cause.
func TestHardwareReservations(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCloud(t, simequinix.Options{})
	newCluster(t, g, ns, c)
	taken, err := c.s.AddHardwareReservation(c.project, "sv", "c3.small.x86")
	g.Expect(err).NotTo(HaveOccurred())
	free, err := c.s.AddHardwareReservation(c.project, "sv", "c3.small.x86")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.api.CreateDevice(ctx, c.project, equinixTakes(taken))
	g.Expect(err).NotTo(HaveOccurred())

	_, listed := newMachine(t, g, ns, "listed", infrav1.EquinixMetalMachineSpec{HardwareReservationID: taken + ", " + free})
	g.Eventually(func(g Gomega) {
		get(g, listed)
		g.Expect(listed.Status.DeviceID).NotTo(BeEmpty())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	d, err := c.api.GetDevice(ctx, listed.Status.DeviceID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.HardwareReservation).NotTo(BeNil())
	g.Expect(d.HardwareReservation.Href).To(HaveSuffix(free))

	_, none := newMachine(t, g, ns, "none-free", infrav1.EquinixMetalMachineSpec{HardwareReservationID: "next-available"})
	g.Eventually(func(g Gomega) {
		get(g, none)
		cond := conditions.Get(none, infrav1.EquinixMetalMachineReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(infrav1.NoHardwareReservationAvailableReason))
		g.Expect(cond.Message).To(ContainSubstring("no available hardware reservations"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(slices.ContainsFunc(c.s.Ledger().Devices, func(d simequinix.LedgerDevice) bool { return d.Hostname == "none-free" })).To(BeFalse())
}

// equinixTakes is a device outside any cluster on hardware reservation id.
func equinixTakes(id string) equinixapi.DeviceCreateInput {
	return equinixapi.DeviceCreateInput{Metro: "sv", Plan: "c3.small.x86", OperatingSystem: "custom_ipxe", Hostname: "someone-else",
		IPXEScriptURL: "http://boot.example/other.ipxe", HardwareReservationID: id}
}

// TestDNSRecords: with spec.dns the provider writes api, api-int and
// *.apps of the cluster on a real BIND, signed with the key of the TSIG
// Secret, which is in no condition or event; a key the server refuses is
// UpdateFailed with the server's answer, and the records come once the
// Secret holds the right key; deleting the cluster removes them.
func TestDNSRecords(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	b := bindtest.Start(t)
	c := newCloud(t, simequinix.Options{})
	tsig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tsig"}, Data: map[string][]byte{
		infrav1.TSIGKeyNameKey: []byte(b.KeyName), infrav1.TSIGAlgorithmKey: []byte(b.Algorithm),
		infrav1.TSIGSecretKey: []byte("c2VjcmV0LXRoYXQtaXMtbm90LXRoZS1zZXJ2ZXJzLWtleQ=="),
	}}
	g.Expect(env.Client.Create(ctx, tsig)).To(Succeed())
	cluster, emc := newCluster(t, g, ns, c, func(emc *infrav1.EquinixMetalCluster) {
		emc.Spec.DNS = &infrav1.EquinixMetalDNS{Server: b.Addr, Zone: "example.com", BaseDomain: "lab.example.com", TSIGKeyRef: infrav1.SecretReference{Name: "tsig"}}
	})

	g.Eventually(func(g Gomega) {
		get(g, emc)
		cond := conditions.Get(emc, infrav1.DNSRecordsReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(infrav1.DNSUpdateFailedReason))
		g.Expect(cond.Message).To(ContainSubstring("NOTAUTH (TSIG key rejected: BADSIG"))
		g.Expect(conditions.IsFalse(emc, infrav1.EquinixMetalClusterReadyCondition)).To(BeTrue())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	b.ExpectNotFound(t, "api.c1.lab.example.com.")

	get(g, tsig)
	tsig.Data[infrav1.TSIGSecretKey] = []byte(b.Secret)
	g.Expect(env.Client.Update(ctx, tsig)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, emc)
		g.Expect(conditions.IsTrue(emc, infrav1.DNSRecordsReadyCondition)).To(BeTrue(), "%v", emc.Status.Conditions)
		g.Expect(conditions.IsTrue(emc, infrav1.EquinixMetalClusterReadyCondition)).To(BeTrue())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	b.ExpectAddrs(t, "api.c1.lab.example.com.", emc.Status.APIIP.Address)
	b.ExpectAddrs(t, "api-int.c1.lab.example.com.", emc.Status.APIIP.Address)
	b.ExpectAddrs(t, "console-openshift-console.apps.c1.lab.example.com.", emc.Status.IngressIP.Address)
	data, err := json.Marshal(emc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).NotTo(ContainSubstring(b.Secret))

	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		gone(g, emc)
		g.Expect(c.s.Ledger().Empty()).To(BeTrue())
	}).WithTimeout(time.Minute).Should(Succeed())
	b.ExpectNotFound(t, "api.c1.lab.example.com.")
	b.ExpectNotFound(t, "api-int.c1.lab.example.com.")
	b.ExpectNotFound(t, "console-openshift-console.apps.c1.lab.example.com.")
}

// TestDeviceWithoutNodeReinstalled: a device active for the cluster's
// deviceBootTimeout without its Machine's Node registering (these tests
// run no installed cluster) is reinstalled, with a fresh iPXE script and
// an event; it stays the machine's one device.
func TestDeviceWithoutNodeReinstalled(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	c := newCloud(t, simequinix.Options{})
	newCluster(t, g, ns, c, func(emc *infrav1.EquinixMetalCluster) {
		emc.Spec.DeviceBootTimeout = &metav1.Duration{Duration: time.Second}
	})
	_, emm := newMachine(t, g, ns, "master-r", infrav1.EquinixMetalMachineSpec{})
	g.Eventually(func(g Gomega) {
		g.Expect(c.s.Requests()).To(HaveKeyWithValue("POST /metal/v1/devices/{id}/actions", BeNumerically(">=", 2)), "reinstalled at least twice")
		get(g, emm)
		g.Expect(emm.Status.DeviceID).NotTo(BeEmpty())
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(c.s.Requests()).To(HaveKeyWithValue("POST /metal/v1/projects/{id}/devices", 1), "one device")
	l := c.s.Ledger()
	g.Expect(l.Devices).To(HaveLen(1))
	g.Expect(l.Devices[0].ID).To(Equal(emm.Status.DeviceID))
	events := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, e := range events.Items {
		notes = append(notes, e.Reason+": "+e.Note)
	}
	g.Expect(notes).To(ContainElement(ContainSubstring("DeviceReinstalling: Device " + emm.Status.DeviceID + " was active for 1s without the Machine's Node registering")))
}
