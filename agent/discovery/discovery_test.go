package discovery_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalshift/metalshift/agent/configdrive"
	"github.com/metalshift/metalshift/agent/deploy"
	"github.com/metalshift/metalshift/agent/discovery"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

const (
	infraEnvID = "5e8a4d5c-7b1e-4c1e-9f7a-3c1d2e3f4a5b"
	clusterID  = "9d1c3b2a-1111-4222-8333-444455556666"
	hostID     = "0c6b3e9a-2f4d-4b8e-9a1c-7d5e6f708192"
	token      = "the-agent-token"
	// hostKey is the host credential the service answers a new host's
	// registration with; hostKey2 the one of a registration after the
	// service forgot the host.
	hostKey   = "the-host-credential"
	hostKey2  = "the-second-host-credential"
	imagePath = "/images/rhcos.raw"
)

// memDisk is a disk in memory.
type memDisk struct {
	mu   sync.Mutex
	name string
	b    []byte
}

func (d *memDisk) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return bytes.NewReader(d.b).ReadAt(p, off)
}

func (d *memDisk) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(d.b[off:], p), nil
}

func (d *memDisk) Info() deploy.DeviceInfo {
	return deploy.DeviceInfo{Name: d.name, SizeBytes: int64(len(d.b))}
}

// newDisk leaves room for an image of 8 MiB before the config drive.
func newDisk(name string) *memDisk {
	return &memDisk{name: name, b: make([]byte, configdrive.Reserved+8<<20)}
}

// osImage is a raw disk image of 4 MiB with an MBR partition table.
func osImage() []byte {
	b := make([]byte, 4<<20)
	_, _ = rand.Read(b)
	clear(b[446:510])
	e := b[446:]
	e[0], e[4] = 0, 0x83
	binary.LittleEndian.PutUint32(e[8:], 2048)
	binary.LittleEndian.PutUint32(e[12:], 4<<20/512-2048)
	b[510], b[511] = 0x55, 0xaa
	return b
}

// service is the agent service's REST API, as far as the tests need it.
type service struct {
	t      *testing.T
	image  []byte
	files  map[string][]byte
	server *httptest.Server

	mu             sync.Mutex
	registerStatus int
	registrations  []assistedapi.HostCreateParams
	batches        []assistedapi.Steps
	polls          int
	replies        []assistedapi.StepReply
	stages         []assistedapi.HostProgress
	unauthorized   []string
	// keys are the host credentials registrations carried ("" for none),
	// proofs their host proofs.
	keys, proofs []string
	// issue is the credential the next registration of an unknown host
	// gets; known is the one the service takes ("" before a registration).
	issue, known string
	// forget makes the next instructions poll answer 404: the service no
	// longer knows the host (its Agent was deleted).
	forget bool
	// handler serves the API (restartable servers take it again).
	handler http.Handler
	// hook, when set, is asked about each file download ("file NAME"),
	// progress report ("progress STAGE") and OS image download ("image")
	// before it is served, and may answer in its stead (see answer);
	// called with mu held.
	hook func(what string) answer
	// down makes the service cut every request short, without an answer,
	// until it is served again (serveOn): it is going away.
	down bool
	// fileRequests and progressRequests count the requests of each.
	fileRequests, progressRequests int
}

// answer is what a hook answers a request with instead of the service.
type answer struct {
	// code is the status to answer with; 0: serve the request; cut:
	// answer nothing and cut every request short from now on (down).
	code int
	// retryAfter is the Retry-After header's value.
	retryAfter string
}

// cut is answer.code for a request the service drops as it goes away.
const cut = -1

func newService(t *testing.T) *service {
	s := &service{t: t, image: osImage(), files: map[string][]byte{}, issue: hostKey}
	mux := http.NewServeMux()
	base := assistedapi.BasePath + "/v2/infra-envs/" + infraEnvID + "/hosts"
	mux.HandleFunc("POST "+base, s.register)
	mux.HandleFunc("GET "+base+"/"+hostID+"/instructions", s.instructions)
	mux.HandleFunc("POST "+base+"/"+hostID+"/instructions", s.reply)
	mux.HandleFunc("PUT "+base+"/"+hostID+"/progress", s.progress)
	mux.HandleFunc("GET "+assistedapi.BasePath+"/v2/clusters/"+clusterID+"/downloads/files", s.file)
	mux.HandleFunc("GET "+imagePath, func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.intercept(w, "image") {
			_, _ = w.Write(s.image)
		}
	})
	s.handler = s.auth(mux)
	s.server = httptest.NewServer(s.handler)
	t.Cleanup(func() { s.server.Close() }) // the last server, after restarts
	return s
}

// intercept asks the hook about a request (mu held, and released by the
// caller's defer) and answers it when the hook says so; it tells whether
// it did.
func (s *service) intercept(w http.ResponseWriter, what string) bool {
	if s.hook == nil {
		return false
	}
	a := s.hook(what)
	switch a.code {
	case 0:
		return false
	case cut:
		s.down = true
		panic(http.ErrAbortHandler) // the connection is closed, nothing answered; the caller's deferred Unlock runs
	}
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	http.Error(w, `{"code":"`+fmt.Sprint(a.code)+`","message":"as the test says"}`, a.code)
	return true
}

// auth checks the credentials as the agent service does: the InfraEnv's
// token registers, the host's credential does the rest (and the token
// alone does not).
func (s *service) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.down {
			s.mu.Unlock()
			panic(http.ErrAbortHandler)
		}
		ok := true
		switch {
		case r.URL.Path == imagePath:
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/hosts"):
			ok = r.Header.Get(assistedapi.AuthHeader) == token
		default:
			ok = s.known != "" && r.Header.Get(assistedapi.HostKeyHeader) == s.known && r.Header.Get(assistedapi.AuthHeader) == ""
		}
		if !ok {
			s.unauthorized = append(s.unauthorized, r.Method+" "+r.URL.Path)
		}
		s.mu.Unlock()
		if !ok {
			http.Error(w, `{"code":"401","message":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *service) register(w http.ResponseWriter, r *http.Request) {
	var p assistedapi.HostCreateParams
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registrations = append(s.registrations, p)
	s.keys = append(s.keys, r.Header.Get(assistedapi.HostKeyHeader))
	s.proofs = append(s.proofs, r.Header.Get(assistedapi.HostProofHeader))
	if s.registerStatus != 0 {
		w.WriteHeader(s.registerStatus)
		_, _ = w.Write([]byte(`{"code":"401","message":"invalid token"}`))
		return
	}
	if s.known == "" {
		// A new host: its credential, answered once.
		s.known = s.issue
		w.Header().Set(assistedapi.HostKeyHeader, s.known)
	} else if r.Header.Get(assistedapi.HostKeyHeader) != s.known {
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"code":"409","message":"registered already"}`))
		return
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(assistedapi.Host{ID: p.HostID, InfraEnvID: infraEnvID, Kind: assistedapi.KindHost, Status: "discovering"})
}

// instructions hands out the batches in order, then nothing.
func (s *service) instructions(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	if s.forget {
		s.forget, s.known, s.issue = false, "", hostKey2
		http.Error(w, `{"code":"404","message":"host not found"}`, http.StatusNotFound)
		return
	}
	steps := assistedapi.Steps{NextInstructionSeconds: 60, PostStepAction: assistedapi.PostStepContinue, Instructions: []assistedapi.Step{}}
	if len(s.batches) > 0 {
		steps, s.batches = s.batches[0], s.batches[1:]
	}
	_ = json.NewEncoder(w).Encode(steps)
}

func (s *service) reply(w http.ResponseWriter, r *http.Request) {
	var rep assistedapi.StepReply
	if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.replies = append(s.replies, rep)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *service) progress(w http.ResponseWriter, r *http.Request) {
	var p assistedapi.HostProgress
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progressRequests++
	if s.intercept(w, "progress "+string(p.CurrentStage)) {
		return
	}
	s.stages = append(s.stages, p)
}

func (s *service) file(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fileRequests++
	name := r.URL.Query().Get("file_name")
	if s.intercept(w, "file "+name) {
		return
	}
	data, ok := s.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(data)
}

func (s *service) queue(batches ...assistedapi.Steps) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, batches...)
}

func (s *service) getReplies() []assistedapi.StepReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]assistedapi.StepReply(nil), s.replies...)
}

func (s *service) getStages() []assistedapi.HostStage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []assistedapi.HostStage
	for _, p := range s.stages {
		out = append(out, p.CurrentStage)
	}
	return out
}

func (s *service) getProgress() []assistedapi.HostProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]assistedapi.HostProgress(nil), s.stages...)
}

func batch(steps ...assistedapi.Step) assistedapi.Steps {
	return assistedapi.Steps{NextInstructionSeconds: 60, PostStepAction: assistedapi.PostStepContinue, Instructions: steps}
}

func step(t assistedapi.StepType, id string, arg any) assistedapi.Step {
	st := assistedapi.Step{StepType: t, StepID: id}
	if arg != nil {
		b, _ := json.Marshal(arg)
		st.Args = []string{string(b)}
	}
	return st
}

// installRequest is an install step's request for role in a cluster of
// high availability mode ha, on /dev/sda.
func (s *service) installRequest(role, ha string) assistedapi.InstallCmdRequest {
	sum := sha256.Sum256(s.image)
	ign := assistedapi.IgnitionFileName(role, hostID)
	s.files[ign] = []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,master-0"}}]}}`)
	return assistedapi.InstallCmdRequest{
		ClusterID: clusterID, HostID: hostID, InfraEnvID: infraEnvID, Role: role,
		BootDevice: "/dev/sda", HighAvailabilityMode: ha,
		OSImage:          assistedapi.OSImage{URL: s.server.URL + imagePath, Checksum: hex.EncodeToString(sum[:]), ChecksumType: "sha256"},
		IgnitionFileName: ign, Hostname: "master-0",
	}
}

// machine is what the agent runs on.
type machine struct {
	disk    *memDisk
	other   *memDisk
	reboots int
	mu      sync.Mutex
	logs    []string
	inv     *assistedapi.Inventory
}

func (m *machine) logf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logs = append(m.logs, fmt.Sprintf(format, args...))
}

func (m *machine) rebootCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reboots
}

// start runs the agent against s until the test ends or the machine
// reboots; the returned channel receives what Run returned.
func start(t *testing.T, s *service, change func(*discovery.Options)) (*machine, <-chan error, context.CancelFunc) {
	m := &machine{
		disk:  newDisk("/dev/sda"),
		other: &memDisk{name: "/dev/sdb", b: make([]byte, 1<<20)},
		inv: &assistedapi.Inventory{Hostname: "localhost", CPU: assistedapi.CPU{Count: 8, Architecture: "x86_64"},
			Memory: assistedapi.Memory{PhysicalBytes: 32 << 30, UsableBytes: 32 << 30}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opts := discovery.Options{
		Config:    deployapi.Discovery{ServiceURL: s.server.URL + "/", InfraEnvID: infraEnvID, Token: token},
		HostID:    hostID,
		Devices:   []deploy.BlockDevice{m.other, m.disk},
		HTTP:      s.server.Client(),
		Inventory: func() (*assistedapi.Inventory, error) { return m.inv, nil },
		Logf:      m.logf,
		Reboot: func(context.Context) error {
			m.mu.Lock()
			m.reboots++
			m.mu.Unlock()
			cancel() // the machine resets
			return nil
		},
		PollInterval: 10 * time.Millisecond,
		Version:      "metalshift-agent/test",
	}
	if change != nil {
		change(&opts)
	}
	done := make(chan error, 1)
	go func() { done <- discovery.Run(ctx, opts) }()
	return m, done, cancel
}

var (
	st  = assistedapi.StageStartingInstallation
	in  = assistedapi.StageInstalling
	wr  = assistedapi.StageWritingImageToDisk
	cp  = assistedapi.StageCopyingRegistryData
	wcp = assistedapi.StageWaitingForControlPlane
	wb  = assistedapi.StageWaitingForBootkube
	wc  = assistedapi.StageWaitingForController
	rb  = assistedapi.StageRebooting
)

// TestInstallMaster: the agent registers (again when asked to), answers
// the inventory and the disk speed check, installs a master — upstream's
// stages, the image and a config drive with the host's Ignition on the
// boot device — and reboots once.
func TestInstallMaster(t *testing.T) {
	g := NewWithT(t)
	s := newService(t)
	req := s.installRequest(assistedapi.RoleMaster, assistedapi.HighAvailabilityFull)
	req.InstallerArgs = []string{"--append-karg", "console=ttyS0", "--save-partlabel=data*", "-n"}
	s.queue(
		assistedapi.Steps{PostStepAction: assistedapi.PostStepExit, Instructions: []assistedapi.Step{}}, // bound: register again
		batch(step(assistedapi.StepInventory, "inventory-1", nil),
			step(assistedapi.StepInstallationDiskSpeedCheck, "disk-speed-1", assistedapi.DiskSpeedCheckRequest{Path: "/dev/sda"})),
		batch(step(assistedapi.StepInstall, "install-1", req)),
	)
	m, done, _ := start(t, s, nil)

	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	g.Expect(m.rebootCount()).To(Equal(1))
	g.Expect(s.unauthorized).To(BeEmpty(), "registrations carry the token, every other request the host's credential")
	g.Expect(s.registrations).To(Equal([]assistedapi.HostCreateParams{
		{HostID: hostID, DiscoveryAgentVersion: "metalshift-agent/test"},
		{HostID: hostID, DiscoveryAgentVersion: "metalshift-agent/test"},
	}))
	g.Expect(s.keys).To(Equal([]string{"", hostKey}), "registering again, the agent proves it is the host")

	replies := s.getReplies()
	g.Expect(replies).To(HaveLen(3))
	g.Expect(replies[0]).To(MatchFields(assistedapi.StepReply{StepType: assistedapi.StepInventory, StepID: "inventory-1"}))
	var inv assistedapi.Inventory
	g.Expect(json.Unmarshal([]byte(replies[0].Output), &inv)).To(Succeed())
	g.Expect(&inv).To(Equal(m.inv))

	g.Expect(replies[1]).To(MatchFields(assistedapi.StepReply{StepType: assistedapi.StepInstallationDiskSpeedCheck, StepID: "disk-speed-1"}))
	var speed assistedapi.DiskSpeedCheckResponse
	g.Expect(json.Unmarshal([]byte(replies[1].Output), &speed)).To(Succeed())
	g.Expect(speed.Path).To(Equal("/dev/sda"))
	g.Expect(speed.IoSyncDuration).To(BeNumerically(">=", 0))

	g.Expect(replies[2]).To(Equal(assistedapi.StepReply{StepType: assistedapi.StepInstall, StepID: "install-1"}))
	g.Expect(s.getStages()).To(Equal([]assistedapi.HostStage{st, in, wr, cp, rb}))

	disk := m.disk.b // Run returned: nothing writes it any more
	g.Expect(disk[512:len(s.image)]).To(Equal(s.image[512:]), "the image is on the boot device, but its partition table")
	cd, ok, err := configdrive.Read(bytes.NewReader(disk), int64(len(disk)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(cd.UserData).To(Equal(s.files[req.IgnitionFileName]))
	g.Expect(cd.MetaData).To(MatchJSON(`{"uuid":"` + hostID + `","name":"master-0","local-hostname":"master-0"}`))
	g.Expect(m.other.b).To(Equal(make([]byte, 1<<20)), "the other disk is untouched")

	for _, l := range m.logs {
		g.Expect(l).NotTo(ContainSubstring(token))
		g.Expect(l).NotTo(ContainSubstring(hostKey))
		g.Expect(l).NotTo(ContainSubstring("data:,master-0"), "no Ignition content")
	}
}

// MatchFields matches a step reply's type and ID and a success.
func MatchFields(want assistedapi.StepReply) OmegaMatcher {
	return And(
		HaveField("StepType", want.StepType), HaveField("StepID", want.StepID),
		HaveField("ExitCode", 0), HaveField("Error", ""), HaveField("Output", Not(BeEmpty())))
}

// TestInstallSingleNode: a single-node cluster's host bootstraps in place:
// upstream's stages, no bootstrap control plane in the live environment.
func TestInstallSingleNode(t *testing.T) {
	for _, role := range []string{assistedapi.RoleBootstrap, assistedapi.RoleMaster} {
		t.Run(role, func(t *testing.T) {
			g := NewWithT(t)
			s := newService(t)
			req := s.installRequest(role, assistedapi.HighAvailabilityNone)
			s.queue(batch(step(assistedapi.StepInstall, "install-sno", req)))
			m, done, _ := start(t, s, func(o *discovery.Options) {
				o.RunBootstrap = func(context.Context, []byte) error {
					t.Error("a single-node cluster bootstraps in place")
					return nil
				}
			})
			g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
			g.Expect(m.rebootCount()).To(Equal(1))
			g.Expect(s.getStages()).To(Equal([]assistedapi.HostStage{st, in, wb, wr, cp, rb}))
			g.Expect(s.getReplies()).To(Equal([]assistedapi.StepReply{{StepType: assistedapi.StepInstall, StepID: "install-sno"}}))
			cd, ok, err := configdrive.Read(m.disk, int64(len(m.disk.b)))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue())
			g.Expect(cd.UserData).To(Equal(s.files[req.IgnitionFileName]))
		})
	}
}

// TestInstallBootstrap: the bootstrap host of a multi-node cluster runs the
// bootstrap Ignition, writes its disk, waits for the masters (reporting
// their count when it changes, with the kubeconfig of the bootstrap
// Ignition) and reboots, in upstream's order.
func TestInstallBootstrap(t *testing.T) {
	g := NewWithT(t)
	s := newService(t)
	req := s.installRequest(assistedapi.RoleBootstrap, assistedapi.HighAvailabilityFull)
	req.BootstrapIgnitionFileName = "bootstrap.ign"
	req.ControlPlaneMasters = 2
	kubeconfig := []byte("apiVersion: v1\nkind: Config\n")
	s.files["bootstrap.ign"] = []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[` +
		`{"path":"` + bootstrapnode.AdminKubeconfigPath + `","contents":{"source":"data:;base64,` + base64.StdEncoding.EncodeToString(kubeconfig) + `"}}]}}`)
	s.queue(batch(step(assistedapi.StepInstall, "install-bootstrap", req)))

	var (
		mu         sync.Mutex
		bootIgn    []byte
		kubeconfs  [][]byte
		readyCalls int
	)
	m, done, _ := start(t, s, func(o *discovery.Options) {
		o.RunBootstrap = func(ctx context.Context, ign []byte) error {
			mu.Lock()
			bootIgn = ign
			mu.Unlock()
			<-ctx.Done()
			return nil
		}
		o.ControlPlaneReady = func(_ context.Context, kc []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			kubeconfs = append(kubeconfs, kc)
			readyCalls++
			return []int{0, 0, 1, 1, 2}[min(readyCalls-1, 4)], nil
		}
	})
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	g.Expect(m.rebootCount()).To(Equal(1))
	g.Expect(s.getProgress()).To(Equal([]assistedapi.HostProgress{
		{CurrentStage: st}, {CurrentStage: in}, {CurrentStage: wr}, {CurrentStage: cp}, {CurrentStage: wcp},
		{CurrentStage: wcp, ProgressInfo: "0/2 control plane nodes ready"},
		{CurrentStage: wcp, ProgressInfo: "1/2 control plane nodes ready"},
		{CurrentStage: wcp, ProgressInfo: "2/2 control plane nodes ready"},
		{CurrentStage: wb}, {CurrentStage: wc}, {CurrentStage: rb},
	}))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(bootIgn).To(Equal(s.files["bootstrap.ign"]))
	g.Expect(kubeconfs).To(HaveEach(Equal(kubeconfig)))
	g.Expect(readyCalls).To(Equal(5))
}

// TestInstallBootstrapKubeconfig: without Options.ControlPlaneReady the
// bootstrap host asks the cluster of the bootstrap Ignition's admin
// kubeconfig (a gzip-compressed file there) for its Ready masters.
func TestInstallBootstrapKubeconfig(t *testing.T) {
	g := NewWithT(t)
	var selectors []string
	var mu sync.Mutex
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		selectors = append(selectors, r.URL.Query().Get("labelSelector"))
		mu.Unlock()
		node := func(name string, ready corev1.ConditionStatus) corev1.Node {
			return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		}
		_ = json.NewEncoder(w).Encode(corev1.NodeList{Items: []corev1.Node{
			node("master-0", corev1.ConditionTrue), node("master-1", corev1.ConditionFalse), node("master-2", corev1.ConditionTrue),
		}})
	}))
	defer api.Close()
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + api.URL + "}\n" +
		"users:\n- name: admin\n  user: {token: t}\ncontexts:\n- name: admin\n  context: {cluster: c, user: admin}\ncurrent-context: admin\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(kubeconfig))
	_ = zw.Close()

	s := newService(t)
	req := s.installRequest(assistedapi.RoleBootstrap, assistedapi.HighAvailabilityFull)
	req.BootstrapIgnitionFileName = "bootstrap.ign"
	req.ControlPlaneMasters = 2
	s.files["bootstrap.ign"] = []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[` +
		`{"path":"` + bootstrapnode.AdminKubeconfigPath + `","contents":{"compression":"gzip","source":"data:;base64,` + base64.StdEncoding.EncodeToString(gz.Bytes()) + `"}}]}}`)
	s.queue(batch(step(assistedapi.StepInstall, "install-bootstrap", req)))
	m, done, _ := start(t, s, func(o *discovery.Options) {
		o.RunBootstrap = func(ctx context.Context, _ []byte) error { <-ctx.Done(); return nil }
	})
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	g.Expect(m.rebootCount()).To(Equal(1))
	g.Expect(s.getProgress()).To(ContainElement(assistedapi.HostProgress{CurrentStage: wcp, ProgressInfo: "2/2 control plane nodes ready"}))
	g.Expect(s.getStages()).To(HaveExactElements(st, in, wr, cp, wcp, wcp, wb, wc, rb))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(selectors).To(HaveEach("node-role.kubernetes.io/master"))
}

// TestInstallFails: an install that cannot be done reports stage Failed
// with the reason, replies exit code 1 with it, and does not reboot; the
// agent goes on polling.
func TestInstallFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*assistedapi.InstallCmdRequest)
		stages []assistedapi.HostStage
		err    string
	}{{
		name: "installer argument",
		change: func(r *assistedapi.InstallCmdRequest) {
			r.InstallerArgs = []string{"--append-karg", "quiet", "--insecure"}
		},
		stages: []assistedapi.HostStage{st},
		err:    `installer argument "--insecure" is not allowed`,
	}, {
		name: "bootstrap without a runner",
		change: func(r *assistedapi.InstallCmdRequest) {
			r.Role, r.BootstrapIgnitionFileName, r.ControlPlaneMasters = assistedapi.RoleBootstrap, "bootstrap.ign", 2
		},
		stages: []assistedapi.HostStage{st},
		err:    "this agent cannot run the bootstrap control plane of a multi-node cluster",
	}, {
		name:   "boot device",
		change: func(r *assistedapi.InstallCmdRequest) { r.BootDevice = "/dev/nvme0n1" },
		stages: []assistedapi.HostStage{st},
		err:    `boot_device: no disk "/dev/nvme0n1" on this host (disks: /dev/sdb, /dev/sda)`,
	}, {
		name:   "checksum",
		change: func(r *assistedapi.InstallCmdRequest) { r.OSImage.Checksum = hex.EncodeToString(make([]byte, 32)) },
		stages: []assistedapi.HostStage{st, in, wr},
		err:    "writing the OS image to /dev/sda: image checksum mismatch",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newService(t)
			req := s.installRequest(assistedapi.RoleMaster, assistedapi.HighAvailabilityFull)
			tc.change(&req)
			s.queue(batch(step(assistedapi.StepInstall, "install-1", req)))
			m, done, cancel := start(t, s, nil)

			g.Eventually(s.getReplies, 10*time.Second).Should(HaveLen(1))
			reply := s.getReplies()[0]
			g.Expect(reply.ExitCode).To(Equal(1))
			g.Expect(reply.Error).To(ContainSubstring(tc.err))
			progress := s.getProgress()
			g.Expect(progress).To(HaveLen(len(tc.stages) + 1))
			for i, stage := range tc.stages {
				g.Expect(progress[i].CurrentStage).To(Equal(stage))
			}
			g.Expect(progress[len(tc.stages)].CurrentStage).To(Equal(assistedapi.StageFailed))
			g.Expect(progress[len(tc.stages)].ProgressInfo).To(Equal(reply.Error))

			polls := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.polls }
			n := polls()
			g.Eventually(polls).Should(BeNumerically(">", n), "the agent goes on polling")
			cancel()
			g.Eventually(done).Should(Receive(BeNil()))
			g.Expect(m.rebootCount()).To(BeZero())
		})
	}
}

// TestChecks: the discovery checks' outputs, an unknown step type, and the
// disk left as it was by the speed check.
func TestChecks(t *testing.T) {
	g := NewWithT(t)
	s := newService(t)
	s.queue(batch(
		step(assistedapi.StepConnectivityCheck, "conn", assistedapi.ConnectivityCheckParams{
			{HostID: "peer", Nics: []assistedapi.ConnectivityCheckNic{{Name: "eth0", IPAddresses: []string{"127.0.0.1", "not-an-ip"}}}},
		}),
		step(assistedapi.StepNTPSynchronizer, "ntp", assistedapi.NTPSynchronizationRequest{NTPSource: "192.0.2.1, localhost,"}),
		step(assistedapi.StepDomainResolution, "dns", assistedapi.DomainResolutionRequest{Domains: []assistedapi.DomainResolutionRequestDomain{
			{DomainName: "localhost"}, {DomainName: "no-such-name.invalid"},
		}}),
		step(assistedapi.StepInstallationDiskSpeedCheck, "speed", assistedapi.DiskSpeedCheckRequest{Path: "/dev/sda"}),
		step("free-network-addresses", "free", nil),
		step(assistedapi.StepStopInstallation, "stop", nil),
		step(assistedapi.StepLogsGather, "logs", nil),
	))
	var end []byte // the last 2 MiB of the installation disk
	m, done, cancel := start(t, s, func(o *discovery.Options) {
		o.Config.NTPSources = []string{"192.0.2.1", "ntp.no-such-name.invalid"}
		d := o.Devices[1].(*memDisk)
		_, _ = rand.Read(d.b[len(d.b)-2<<20:])
		end = bytes.Clone(d.b[len(d.b)-2<<20:])
	})
	g.Eventually(s.getReplies, 10*time.Second).Should(HaveLen(7))
	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
	replies := s.getReplies()
	output := func(i int, v any) {
		g.Expect(replies[i].ExitCode).To(BeZero(), "%+v", replies[i])
		g.Expect(json.Unmarshal([]byte(replies[i].Output), v)).To(Succeed())
	}

	var conn assistedapi.ConnectivityReport
	output(0, &conn)
	g.Expect(conn).To(Equal(assistedapi.ConnectivityReport{RemoteHosts: []assistedapi.ConnectivityRemoteHost{{HostID: "peer", L3Connectivity: []assistedapi.L3Connectivity{
		{RemoteIPAddress: "127.0.0.1", Successful: true}, {RemoteIPAddress: "not-an-ip"},
	}}}}))

	var ntp assistedapi.NTPSynchronizationResponse
	output(1, &ntp)
	g.Expect(ntp.NTPSources).To(Equal([]assistedapi.NTPSource{
		{SourceName: "192.0.2.1", SourceState: assistedapi.NTPSourceSynced},
		{SourceName: "localhost", SourceState: assistedapi.NTPSourceSynced},
		{SourceName: "ntp.no-such-name.invalid", SourceState: assistedapi.NTPSourceUnreachable},
	}))

	var dns assistedapi.DomainResolutionResponse
	output(2, &dns)
	g.Expect(dns.Resolutions).To(HaveLen(2))
	g.Expect(dns.Resolutions[0].DomainName).To(Equal("localhost"))
	g.Expect(append(dns.Resolutions[0].IPV4Addresses, dns.Resolutions[0].IPV6Addresses...)).NotTo(BeEmpty())
	g.Expect(dns.Resolutions[1]).To(Equal(assistedapi.DomainResolution{DomainName: "no-such-name.invalid", IPV4Addresses: []string{}, IPV6Addresses: []string{}}))

	var speed assistedapi.DiskSpeedCheckResponse
	output(3, &speed)
	g.Expect(speed.Path).To(Equal("/dev/sda"))
	g.Expect(m.disk.b[len(m.disk.b)-2<<20:]).To(Equal(end), "the speed check restores what it overwrote")

	g.Expect(replies[4]).To(Equal(assistedapi.StepReply{StepType: "free-network-addresses", StepID: "free", ExitCode: -1,
		Error: "step type free-network-addresses is not supported by this agent"}))
	g.Expect(replies[5]).To(Equal(assistedapi.StepReply{StepType: assistedapi.StepStopInstallation, StepID: "stop"}))
	g.Expect(replies[6]).To(Equal(assistedapi.StepReply{StepType: assistedapi.StepLogsGather, StepID: "logs"}))
}

// TestRegistrationRefused: a refused registration ends Run with an error
// naming the status, at once.
func TestRegistrationRefused(t *testing.T) {
	g := NewWithT(t)
	s := newService(t)
	s.registerStatus = http.StatusUnauthorized
	_, done, _ := start(t, s, nil)
	var err error
	g.Eventually(done, 5*time.Second).Should(Receive(&err))
	g.Expect(err).To(MatchError(ContainSubstring("401")))
	g.Expect(err.Error()).To(HavePrefix("registering host " + hostID + " with infra-env " + infraEnvID + ": POST "))
	g.Expect(err.Error()).NotTo(ContainSubstring(token))
	g.Expect(s.registrations).To(HaveLen(1), "a refusal is not retried")
}

// TestHostCredential: the agent keeps the credential its registration
// answered and sends it, not the InfraEnv's token, on every later call;
// when the service no longer knows the host (404), the agent registers
// anew and takes the new credential. A service that answers a new host's
// registration without a credential is refused; a registration the
// service refuses for want of the host's credential (409) is final.
func TestHostCredential(t *testing.T) {
	t.Run("kept, and renewed after the host was forgotten", func(t *testing.T) {
		g := NewWithT(t)
		s := newService(t)
		s.queue(batch(step(assistedapi.StepInventory, "inventory-1", nil)))
		start(t, s, nil)
		g.Eventually(func() int { return len(s.getReplies()) }, 10*time.Second).Should(Equal(1))
		s.mu.Lock()
		s.forget = true
		s.mu.Unlock()
		s.queue(batch(step(assistedapi.StepInventory, "inventory-2", nil)))
		g.Eventually(func() int { return len(s.getReplies()) }, 10*time.Second).Should(Equal(2))
		s.mu.Lock()
		defer s.mu.Unlock()
		g.Expect(s.unauthorized).To(BeEmpty())
		g.Expect(s.keys).To(Equal([]string{"", hostKey}), "the second registration is of a new host, sent with the old credential the service ignores")
		g.Expect(s.known).To(Equal(hostKey2))
	})
	t.Run("a registration answered without a credential", func(t *testing.T) {
		g := NewWithT(t)
		s := newService(t)
		s.issue = ""
		_, done, _ := start(t, s, nil)
		var err error
		g.Eventually(done, 5*time.Second).Should(Receive(&err))
		g.Expect(err).To(MatchError("registering host " + hostID + " with infra-env " + infraEnvID +
			": the service answered no host credential (X-Metalshift-Host-Key)"))
	})
	t.Run("refused without the host's credential", func(t *testing.T) {
		g := NewWithT(t)
		s := newService(t)
		s.known = "another machine's credential"
		_, done, _ := start(t, s, nil)
		var err error
		g.Eventually(done, 5*time.Second).Should(Receive(&err))
		g.Expect(err).To(MatchError(ContainSubstring("409 Conflict")))
		g.Expect(s.registrations).To(HaveLen(1), "a refusal is not retried")
	})
}

// TestStages: upstream's stage order for each role.
func TestStages(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		role, ha string
		want     []assistedapi.HostStage
	}{
		{assistedapi.RoleBootstrap, assistedapi.HighAvailabilityFull, []assistedapi.HostStage{st, in, wr, cp, wcp, wb, wc, rb}},
		{assistedapi.RoleMaster, assistedapi.HighAvailabilityFull, []assistedapi.HostStage{st, in, wr, cp, rb}},
		{assistedapi.RoleArbiter, "", []assistedapi.HostStage{st, in, wr, cp, rb}},
		{assistedapi.RoleWorker, assistedapi.HighAvailabilityFull, []assistedapi.HostStage{st, in, wr, wcp, rb}},
		{assistedapi.RoleBootstrap, assistedapi.HighAvailabilityNone, []assistedapi.HostStage{st, in, wb, wr, cp, rb}},
		{assistedapi.RoleMaster, assistedapi.HighAvailabilityNone, []assistedapi.HostStage{st, in, wb, wr, cp, rb}},
	} {
		got, err := discovery.Stages(tc.role, tc.ha)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(tc.want), "%s %s", tc.role, tc.ha)
	}
	_, err := discovery.Stages(assistedapi.RoleWorker, assistedapi.HighAvailabilityNone)
	g.Expect(err).To(MatchError(`role "worker" in a single-node cluster: want bootstrap or master`))
	_, err = discovery.Stages("auto-assign", "")
	g.Expect(err).To(MatchError(`unknown role "auto-assign": want bootstrap, master, arbiter or worker`))
}
