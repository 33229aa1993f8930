package equinix

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/metalshift/metalshift/agent/configdrive"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/hostengine/deployserver"
	"github.com/metalshift/metalshift/infrastructure/equinix"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
	simequinix "github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/machine"
)

var (
	env *testenv.Env
	key = []byte("equinix-e2e-signing-key-32-bytes")
	// boot is the deploy server's listener, held from the start: devices
	// boot from it, and the provider signs URLs for it.
	boot net.Listener
)

func TestMain(m *testing.M) {
	// QEMU starts this binary for each connection of a VM to the metadata
	// service (TestQEMUDevice).
	if len(os.Args) > 1 && os.Args[1] == sim.MetadataForwardArg {
		os.Exit(sim.RunMetadataForward(os.Args[2:]))
	}
	var err error
	if boot, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	os.Exit(testenv.Run(m, &env, testenv.Options{
		CAPICore: true,
		Components: []component.Component{{Name: "equinix", Setup: func(ctx context.Context, hub *component.Hub) error {
			ds, err := deployserver.New(deployserver.Options{Client: hub.Manager.GetClient(), Key: key, BaseURL: "http://" + boot.Addr().String()})
			if err != nil {
				return err
			}
			go func() { _ = http.Serve(boot, ds.BootHandler("http://"+boot.Addr().String())) }()
			return equinix.Setup(ctx, hub.Manager, equinix.Options{PollInterval: 100 * time.Millisecond,
				BootURL: "http://" + boot.Addr().String(), SigningKey: key})
		}}},
	}))
}

// TestMachineBootsDevice: a Machine on an EquinixMetalMachine gets a
// device whose custom iPXE is the hub's signed script; the device's
// machine boots it, reads the metadata service as the device, configures
// its addresses, writes the machine's image once and boots its disk with
// the Machine's bootstrap data as its Ignition and the machine's
// providerID in its metadata.
func TestMachineBootsDevice(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	image := make([]byte, 3<<20+5)
	_, _ = rand.Read(image)
	sum := sha256.Sum256(image)
	var imageGets atomic.Int32
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		imageGets.Add(1)
		http.ServeContent(w, r, "os.raw", time.Time{}, bytes.NewReader(image))
	}))
	t.Cleanup(images.Close)

	var mu sync.Mutex
	booted := map[string]configdrive.Contents{}
	cloud := sim.NewMetalCloud(sim.MetalCloudOptions{DiskSizeBytes: 64 << 30, RetryPause: 10 * time.Millisecond,
		OnDiskBoot: func(_ context.Context, m *machine.Machine, cd configdrive.Contents) {
			mu.Lock()
			defer mu.Unlock()
			booted[m.ID] = cd
		}})
	s := simequinix.New(simequinix.Options{Machines: cloud,
		Timings: simequinix.Timings{Queued: 100 * time.Millisecond, Provisioning: 300 * time.Millisecond, Deprovisioning: 200 * time.Millisecond, Power: 100 * time.Millisecond}})
	api := httptest.NewServer(s.Handler())
	t.Cleanup(api.Close)
	metadata := httptest.NewServer(s.MetadataHandler())
	t.Cleanup(metadata.Close)
	t.Cleanup(cloud.Close) // first: the machines stop before the servers
	token := s.NewToken()
	project, err := s.CreateProject(token, "e2e")
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metal-key"},
		Data: map[string][]byte{infrav1.EquinixMetalAPIKeyKey: []byte(token)}})).To(Succeed())
	emc := &infrav1.EquinixMetalCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: infrav1.EquinixMetalClusterSpec{
		ProjectID: project.ID, Metro: "sv", CredentialsRef: infrav1.SecretReference{Name: "metal-key"},
		APIURL: api.URL + "/metal/v1", MetadataURL: metadata.URL}}
	g.Expect(env.Client.Create(ctx, emc)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "EquinixMetalCluster", Name: "c1"}}})).To(Succeed())
	const bootstrap = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,master-0"}}]}}`
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "master-0-bootstrap"},
		Data: map[string][]byte{"value": []byte(bootstrap), "format": []byte("ignition")}})).To(Succeed())
	emm := &infrav1.EquinixMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "master-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: infrav1.EquinixMetalMachineSpec{Plan: "c3.small.x86",
			Image: &infrav1.Image{URL: images.URL + "/os.raw", Checksum: hex.EncodeToString(sum[:]), ChecksumType: "sha256"}}}
	g.Expect(env.Client.Create(ctx, emm)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "master-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("master-0-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "EquinixMetalMachine", Name: "master-0"}},
	})).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(emm), emm)).To(Succeed())
		g.Expect(conditions.IsTrue(emm, infrav1.EquinixMetalMachineReadyCondition)).To(BeTrue(), "%v", emm.Status.Conditions)
		// The conditions are patched before the rest of the status: wait
		// for the addresses and the providerID too.
		g.Expect(emm.Status.Addresses).NotTo(BeEmpty())
		g.Expect(emm.Spec.ProviderID).NotTo(BeEmpty())
	}).WithTimeout(time.Minute).Should(Succeed())
	id := emm.Status.DeviceID
	var cd configdrive.Contents
	g.Eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		var ok bool
		cd, ok = booted[id]
		return ok
	}).WithTimeout(time.Minute).Should(BeTrue(), func() []string { return cloud.Log(id) })

	// The Machine's Ignition, and the machine's identity for its Node.
	g.Expect(string(cd.UserData)).To(Equal(bootstrap))
	var md map[string]any
	g.Expect(json.Unmarshal(cd.MetaData, &md)).To(Succeed())
	g.Expect(md).To(HaveKeyWithValue("providerid", emm.Spec.ProviderID))
	g.Expect(md).To(HaveKeyWithValue("local-hostname", "master-0"))
	// The image, once, on the disk.
	m := cloud.Machine(id)
	g.Expect(m.BootedOS()).To(Equal(sim.OSDisk))
	g.Expect(imageGets.Load()).To(Equal(int32(1)))
	head := make([]byte, 4096)
	_, err = m.Hardware.Disks[0].ReadAt(head, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head).To(Equal(image[:4096]))
	// Its addresses, from the metadata service.
	nets := cloud.Networks(id)
	g.Expect(nets).To(HaveLen(1))
	var configured []string
	for _, a := range nets[0].Addresses {
		configured = append(configured, a.Prefix.Addr().String())
	}
	var want []string
	for _, a := range emm.Status.Addresses {
		if a.Type != clusterv1.MachineHostName {
			want = append(want, a.Address)
		}
	}
	g.Expect(configured).To(ConsistOf(want))
}
