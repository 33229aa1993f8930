package metalcloud

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/boot"
	"github.com/metalshift/metalshift/agent/configdrive"
	"github.com/metalshift/metalshift/agent/deploy"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// fileDisk is a sparse file as a disk; like the simulator's disks it takes
// the config drive of an image without a partition table.
type fileDisk struct {
	*os.File
	name string
	size int64
}

func (d fileDisk) Info() deploy.DeviceInfo {
	return deploy.DeviceInfo{Name: d.name, SizeBytes: d.size}
}
func (fileDisk) UnpartitionedConfigDrive() bool { return true }

func newDisk(t *testing.T, name string, size int64) fileDisk {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(name)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return fileDisk{File: f, name: name, size: size}
}

func testMetadata() equinixapi.Metadata {
	return equinixapi.Metadata{
		ID: "7f3c2a10-5b4e-4c1d-9e2f-0a1b2c3d4e5f", Hostname: "worker-0", State: equinixapi.StateProvisioning,
		Network: equinixapi.MetadataNetwork{
			Bonding: equinixapi.MetadataBonding{Mode: equinixapi.BondModeLACP},
			Interfaces: []equinixapi.MetadataInterface{
				{Name: "eth0", MAC: "02:4D:00:00:00:01", Bond: "bond0"}, {Name: "eth1", MAC: "02:4d:00:00:00:02", Bond: "bond0"},
			},
			Addresses: []equinixapi.MetadataAddress{
				{AddressFamily: 4, Public: false, Management: true, Enabled: true, Address: "10.70.1.3", Gateway: "10.70.1.2", CIDR: 31},
				{AddressFamily: 4, Public: true, Management: true, Enabled: true, Address: "147.75.1.2", Gateway: "147.75.1.1", CIDR: 31},
				{AddressFamily: 6, Public: true, Management: true, Enabled: true, Address: "2604:1380::3", Gateway: "2604:1380::2", CIDR: 127},
				{AddressFamily: 4, Public: true, Enabled: false, Address: "147.75.9.9", Gateway: "147.75.9.8", CIDR: 31},
			},
		},
	}
}

// cloud is a metadata service and an image server for one machine.
type cloud struct {
	srv      *httptest.Server
	md       equinixapi.Metadata
	userdata string
	image    []byte
	// failures is how many metadata calls fail with 503 first.
	failures     atomic.Int32
	mdCalls      atomic.Int32
	imageGets    atomic.Int32
	netBeforeImg atomic.Bool
	rec          *Recorder
}

func newCloud(t *testing.T) *cloud {
	c := &cloud{md: testMetadata(), userdata: `{"ignition":{"version":"3.4.0"}}`, image: make([]byte, 3<<20+123), rec: &Recorder{}}
	_, _ = rand.Read(c.image)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metadata", func(w http.ResponseWriter, r *http.Request) {
		c.mdCalls.Add(1)
		if c.failures.Add(-1) >= 0 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(c.md)
	})
	mux.HandleFunc("GET /userdata", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(c.userdata)) })
	mux.HandleFunc("GET /os.img", func(w http.ResponseWriter, r *http.Request) {
		c.imageGets.Add(1)
		c.netBeforeImg.Store(len(c.rec.Networks()) == 1)
		http.ServeContent(w, r, "os.img", time.Time{}, bytes.NewReader(c.image))
	})
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	return c
}

func (c *cloud) options(devs ...deploy.BlockDevice) (Options, *logs) {
	sum := sha256.Sum256(c.image)
	l := &logs{}
	return Options{
		Config: deployapi.BootConfig{MetalCloud: &deployapi.MetalCloud{MetadataURL: c.srv.URL + "/",
			Image: deployapi.Image{URL: c.srv.URL + "/os.img", Checksum: hex.EncodeToString(sum[:])}}},
		Devices: devs, HTTP: c.srv.Client(), Network: c.rec, Logf: l.add, RetryPause: time.Millisecond,
	}, l
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// TestRunInstalls: through two failed metadata reads, the network of the
// metadata is configured before the image is downloaded, the image goes
// to the smallest disk of at least 4 GiB, and its config drive carries the
// user data and the device's identity.
func TestRunInstalls(t *testing.T) {
	g := NewWithT(t)
	c := newCloud(t)
	c.failures.Store(2)
	small := newDisk(t, "/dev/sdc", 1<<30)
	big := newDisk(t, "/dev/sdb", 2000<<30)
	root := newDisk(t, "/dev/sda", 240<<30)
	opts, l := c.options(small, big, root)

	g.Expect(Run(context.Background(), opts)).To(Succeed())

	g.Expect(c.mdCalls.Load()).To(Equal(int32(3)), "two 503s, then the metadata")
	g.Expect(c.imageGets.Load()).To(Equal(int32(1)))
	g.Expect(c.netBeforeImg.Load()).To(BeTrue(), "the network is configured before the image is downloaded")
	g.Expect(c.rec.Networks()).To(Equal([]Network{{
		Bond: "bond0", BondMode: 4,
		Members: []NIC{{Name: "eth0", MAC: "02:4d:00:00:00:01"}, {Name: "eth1", MAC: "02:4d:00:00:00:02"}},
		Addresses: []Address{
			{Prefix: netip.MustParsePrefix("10.70.1.3/31"), Gateway: netip.MustParseAddr("10.70.1.2"), Management: true},
			{Prefix: netip.MustParsePrefix("147.75.1.2/31"), Gateway: netip.MustParseAddr("147.75.1.1"), Public: true, Management: true},
			{Prefix: netip.MustParsePrefix("2604:1380::3/127"), Gateway: netip.MustParseAddr("2604:1380::2"), Public: true, Management: true},
		},
	}}), "the disabled address is left out")
	g.Expect(l.get()).To(ContainElements(
		"Configured bond0 address 10.70.1.3/31 gateway 10.70.1.2 (private IPv4)",
		"Configured bond0 address 147.75.1.2/31 gateway 147.75.1.1 (public IPv4)",
		"Configured bond0 address 2604:1380::3/127 gateway 2604:1380::2 (public IPv6)",
	))

	got := make([]byte, len(c.image))
	_, err := root.ReadAt(got, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(c.image), "the image is on the smallest disk of at least 4 GiB")
	cd, ok, err := configdrive.Read(root, root.size)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(string(cd.UserData)).To(Equal(c.userdata))
	var meta map[string]string
	g.Expect(json.Unmarshal(cd.MetaData, &meta)).To(Succeed())
	g.Expect(meta).To(Equal(map[string]string{"uuid": c.md.ID, "name": "worker-0", "local-hostname": "worker-0",
		"providerid": "equinixmetal://" + c.md.ID}))
	for _, d := range []fileDisk{small, big} {
		_, ok, _ := configdrive.Read(d, d.size)
		g.Expect(ok).To(BeFalse(), d.name)
	}
}

// TestRunRefuses: what cannot install a machine fails before a disk is
// written, saying why, without quoting the user data.
func TestRunRefuses(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(c *cloud, o *Options)
		want     string
		mdCalls  int32
		notWants []string
	}{
		{name: "a cloud-config", setup: func(c *cloud, _ *Options) { c.userdata = "#cloud-config\npassword: hunter2\n" },
			want: "the user data is not an Ignition config: it starts with '#'", mdCalls: 1, notWants: []string{"hunter2"}},
		{name: "JSON without ignition.version", setup: func(c *cloud, _ *Options) { c.userdata = `{"secret":"hunter2"}` },
			want: "the user data is not an Ignition config: it has no ignition.version", mdCalls: 1, notWants: []string{"hunter2"}},
		{name: "not JSON", setup: func(c *cloud, _ *Options) { c.userdata = `hunter2` },
			want: "the user data is not an Ignition config: it is not JSON", mdCalls: 1},
		{name: "no user data", setup: func(c *cloud, _ *Options) { c.userdata = "" },
			want: "the device has no user data", mdCalls: 1},
		{name: "the metadata service down for good", setup: func(c *cloud, o *Options) { c.failures.Store(100); o.Retries = 2 },
			want: "503 Service Unavailable: try later (gave up after 3 attempts)", mdCalls: 3},
		{name: "an unknown machine", setup: func(c *cloud, o *Options) {
			o.Config.MetalCloud.MetadataURL += "nothing"
		}, want: "404 Not Found", mdCalls: 0},
		{name: "metadata without addresses", setup: func(c *cloud, _ *Options) { c.md.Network.Addresses = nil },
			want: "the metadata lists no enabled addresses", mdCalls: 1},
		{name: "no metal cloud section", setup: func(_ *cloud, o *Options) { o.Config.MetalCloud = nil },
			want: "the boot configuration has no metal cloud section"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := newCloud(t)
			root := newDisk(t, "/dev/sda", 240<<30)
			opts, l := c.options(root)
			tt.setup(c, &opts)
			err := Run(context.Background(), opts)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			g.Expect(c.mdCalls.Load()).To(Equal(tt.mdCalls))
			g.Expect(c.imageGets.Load()).To(BeZero(), "nothing is downloaded")
			_, ok, _ := configdrive.Read(root, root.size)
			g.Expect(ok).To(BeFalse(), "nothing is written")
			for _, s := range tt.notWants {
				g.Expect(err.Error()).NotTo(ContainSubstring(s))
				g.Expect(l.get()).NotTo(ContainElement(ContainSubstring(s)))
			}
		})
	}
}

// TestRunStopsWithContext: a cancelled run stops retrying at once.
func TestRunStopsWithContext(t *testing.T) {
	g := NewWithT(t)
	c := newCloud(t)
	c.failures.Store(1000)
	opts, _ := c.options(newDisk(t, "/dev/sda", 240<<30))
	opts.RetryPause = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	g.Eventually(c.mdCalls.Load).Should(Equal(int32(1)))
	cancel()
	g.Eventually(done).Should(Receive(MatchError(context.Canceled)))
}

func TestNetworkFromMetadata(t *testing.T) {
	tests := []struct {
		name string
		edit func(md *equinixapi.Metadata)
		want string
	}{
		{name: "two bonds", edit: func(md *equinixapi.Metadata) { md.Network.Interfaces[1].Bond = "bond1" }, want: "two bonds (bond0 and bond1)"},
		{name: "a NIC without a MAC", edit: func(md *equinixapi.Metadata) { md.Network.Interfaces[0].MAC = "" }, want: "interface eth0 has no MAC"},
		{name: "no NICs", edit: func(md *equinixapi.Metadata) { md.Network.Interfaces = nil }, want: "no network interfaces"},
		{name: "a bad address", edit: func(md *equinixapi.Metadata) { md.Network.Addresses[0].Address = "10.70.1" }, want: `address "10.70.1"`},
		{name: "a bad prefix", edit: func(md *equinixapi.Metadata) { md.Network.Addresses[0].CIDR = 33 }, want: "prefix length 33"},
		{name: "a gateway of another family", edit: func(md *equinixapi.Metadata) { md.Network.Addresses[2].Gateway = "10.0.0.1" }, want: "another family"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := testMetadata()
			tt.edit(&md)
			_, err := NetworkFromMetadata(md)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
	t.Run("no bond named", func(t *testing.T) {
		md := testMetadata()
		for i := range md.Network.Interfaces {
			md.Network.Interfaces[i].Bond = ""
		}
		n, err := NetworkFromMetadata(md)
		g := NewWithT(t)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Bond).To(Equal(DefaultBond))
	})
}

// TestPlan: the bond of the metadata's NICs in its mode, every enabled
// address with its prefix length, the default routes through the public
// gateways of the device's own addresses (not an elastic one's), and the
// private subnets through the private gateway.
func TestPlan(t *testing.T) {
	g := NewWithT(t)
	md := testMetadata()
	md.PrivateSubnets = []string{"10.0.0.0/8"}
	// An elastic address (not management) listed first: its gateway is not
	// the device's.
	md.Network.Addresses = append([]equinixapi.MetadataAddress{
		{AddressFamily: 4, Public: true, Enabled: true, Address: "147.75.200.9", Gateway: "147.75.200.8", CIDR: 32},
	}, md.Network.Addresses...)
	n, err := NetworkFromMetadata(md)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Plan(n)).To(Equal(boot.Bond{
		Name: "bond0", Mode: 4, MACs: []string{"02:4d:00:00:00:01", "02:4d:00:00:00:02"},
		Addresses: []netip.Prefix{
			netip.MustParsePrefix("147.75.200.9/32"), netip.MustParsePrefix("10.70.1.3/31"),
			netip.MustParsePrefix("147.75.1.2/31"), netip.MustParsePrefix("2604:1380::3/127"),
		},
		Routes: []boot.Route{
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("147.75.1.1")},
			{Dst: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("2604:1380::2")},
			{Dst: netip.MustParsePrefix("10.0.0.0/8"), Gateway: netip.MustParseAddr("10.70.1.2")},
		},
	}))
	g.Expect(fmt.Sprint(Plan(n).Routes)).To(Equal("[default via 147.75.1.1 default via 2604:1380::2 10.0.0.0/8 via 10.70.1.2]"))

	// Without private_subnets, Equinix Metal's 10.0.0.0/8; without a public
	// IPv6 address, no IPv6 default route; an elastic address's gateway
	// when the device's own has none.
	md = testMetadata()
	md.Network.Addresses = []equinixapi.MetadataAddress{
		{AddressFamily: 4, Public: false, Management: true, Enabled: true, Address: "10.70.1.3", Gateway: "10.70.1.2", CIDR: 31},
		{AddressFamily: 4, Public: true, Management: true, Enabled: true, Address: "147.75.1.2", CIDR: 31},
		{AddressFamily: 4, Public: true, Enabled: true, Address: "147.75.200.9", Gateway: "147.75.200.8", CIDR: 31},
	}
	n, err = NetworkFromMetadata(md)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Plan(n).Routes).To(Equal([]boot.Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("147.75.200.8")},
		{Dst: netip.MustParsePrefix("10.0.0.0/8"), Gateway: netip.MustParseAddr("10.70.1.2")},
	}))

	md.PrivateSubnets = []string{"fd00::/8"}
	_, err = NetworkFromMetadata(md)
	g.Expect(err).To(MatchError(ContainSubstring(`private subnet "fd00::/8" is not an IPv4 prefix`)))
}
