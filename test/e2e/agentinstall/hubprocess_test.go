package agentinstall

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/component"
)

// The benchmark runs the hub's manager (the agent service and its
// controllers) as a process of its own, so that its memory and CPU are
// measured apart from the simulator's: the test binary started again with
// these variables runs only that manager (see TestMain).
const (
	// hubProcessEnv is the kubeconfig of the hub's kube-apiserver.
	hubProcessEnv = "METALSHIFT_INSTALLTEST_HUB_KUBECONFIG"
	hubAddrEnv    = "METALSHIFT_INSTALLTEST_HUB_ADDR"
	hubKeyEnv     = "METALSHIFT_INSTALLTEST_HUB_KEY"
	hubPollEnv    = "METALSHIFT_INSTALLTEST_HUB_POLL"
	// hubShardEnv is the manager's --watch-filter value; empty: none.
	hubShardEnv = "METALSHIFT_INSTALLTEST_HUB_SHARD"
)

// hubProcess is the manager process: the agent service at $hubAddrEnv
// with upstream's disconnection timeout and the given poll interval,
// logging at info level to stderr, until SIGTERM.
func hubProcess() int {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(hubProcessEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hub process:", err)
		return 1
	}
	cfg.QPS = -1 // no client-side rate limit, as cmd/manager's ctrl.GetConfig sets
	k, err := hex.DecodeString(os.Getenv(hubKeyEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hub process: key:", err)
		return 1
	}
	poll, err := time.ParseDuration(os.Getenv(hubPollEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hub process: poll interval:", err)
		return 1
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.InfoLevel)))
	defer hubProcessProfile()()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c := assisted.Component()
	c.Flags, c.Complete = nil, nil
	c.Setup = func(ctx context.Context, hub *component.Hub) error {
		return assisted.Setup(ctx, hub, assisted.Options{ListenAddr: os.Getenv(hubAddrEnv), PollInterval: poll, Key: k})
	}
	mgr, err := component.NewManager(ctx, cfg, "agent-service", component.Options{WatchFilterValue: os.Getenv(hubShardEnv)}, []component.Component{c})
	if err != nil {
		fmt.Fprintln(os.Stderr, "hub process:", err)
		return 1
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hub process:", err)
		return 1
	}
	return 0
}

// hubChild is a running hub manager process.
type hubChild struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

// startHubProcess starts the manager process against envtest with the
// agent service at serviceAddr, logging to dir, and waits until the
// service listens.
func startHubProcess(g *WithT, poll time.Duration, dir string) *hubChild {
	return startHubProcessAt(g, poll, dir, serviceAddr, "")
}

// startHubProcessAt starts the manager process of the given --watch-filter
// value (none when empty) with its agent service at addr, logging to dir
// (hub.log, or hub-<shard>.log), and waits until the service listens.
func startHubProcessAt(g *WithT, poll time.Duration, dir, addr, shard string) *hubChild {
	kc := filepath.Join(dir, "kubeconfig")
	g.Expect(writeKubeconfig(env.Config, kc)).To(Succeed())
	logName := "hub.log"
	if shard != "" {
		logName = "hub-" + shard + ".log"
	}
	h := &hubChild{log: filepath.Join(dir, logName), done: make(chan error, 1)}
	out, err := os.Create(h.log)
	g.Expect(err).NotTo(HaveOccurred())
	// This test binary, as the hub's manager (see TestMain).
	h.cmd = exec.Command(os.Args[0], "-test.run=^$")
	h.cmd.Env = append(os.Environ(), hubProcessEnv+"="+kc, hubAddrEnv+"="+addr, hubKeyEnv+"="+hex.EncodeToString(key),
		hubPollEnv+"="+poll.String(), hubShardEnv+"="+shard)
	if d := os.Getenv(benchProfileEnv); d != "" {
		profile := filepath.Join(dir, strings.TrimSuffix(logName, ".log")+".cpu.pprof")
		h.cmd.Env = append(h.cmd.Env, hubProfileEnv+"="+profile+","+d)
	}
	h.cmd.Stdout, h.cmd.Stderr = out, out
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.Expect(h.cmd.Start()).To(Succeed())
	go func() {
		h.done <- h.cmd.Wait()
		out.Close()
	}()
	g.Eventually(func() error {
		select {
		case err := <-h.done:
			h.done <- err
			return StopTrying(fmt.Sprintf("the hub process exited: %v; its log:\n%s", err, tail(h.log, 4000)))
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	return h
}

// stop sends SIGTERM and waits for the process (SIGKILL after 30s).
func (h *hubChild) stop() error {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-h.done:
		return err
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
		return fmt.Errorf("the hub process did not stop in 30s")
	}
}

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// writeKubeconfig writes an admin kubeconfig for cfg.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// proc is a process whose memory and CPU the benchmark reports.
type proc struct {
	name string
	pid  int
}

// hubProcs are the hub's processes: envtest's etcd and kube-apiserver
// (children of this process) and the manager.
func hubProcs(manager int) []proc {
	ps := []proc{{"manager", manager}}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(stat)
		comm := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if ppid, _ := strconv.Atoi(fields[1]); ppid == os.Getpid() && (comm == "etcd" || comm == "kube-apiserver") {
			ps = append(ps, proc{comm, pid})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}

// status returns fields of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func status(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// cpuSeconds is the user + system CPU time of pid.
func cpuSeconds(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// utime and stime are fields 14 and 15 of stat, 12 and 13 after comm.
	u, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (u + st) / 100 // USER_HZ
}

// rssSampler records the peak resident memory of processes while it runs.
type rssSampler struct {
	mu   sync.Mutex
	peak map[int]int64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(pids []int, every time.Duration) *rssSampler {
	s := &rssSampler{peak: map[int]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.mu.Lock()
			for _, pid := range pids {
				s.peak[pid] = max(s.peak[pid], status(pid, "VmRSS"))
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the peaks in KiB by pid.
func (s *rssSampler) finish() map[int]int64 {
	close(s.stop)
	<-s.done
	return s.peak
}

// requestKey is a verb, a resource[.group][/subresource] and a response code.
type requestKey struct{ verb, resource, code string }

// requestCounts reads the hub kube-apiserver's apiserver_request_total.
func requestCounts(g *WithT) map[requestKey]float64 {
	hc, err := rest.HTTPClientFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := hc.Get(strings.TrimSuffix(env.Config.Host, "/") + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return parseRequestTotals(string(data))
}

// parseRequestTotals sums apiserver_request_total samples of Prometheus'
// text format by verb, resource and code.
func parseRequestTotals(text string) map[requestKey]float64 {
	out := map[requestKey]float64{}
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(rest[:end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		res := labels["resource"]
		if labels["group"] != "" {
			res += "." + labels["group"]
		}
		if labels["subresource"] != "" {
			res += "/" + labels["subresource"]
		}
		out[requestKey{labels["verb"], res, labels["code"]}] += v
	}
	return out
}

// isWrite tells the verbs of apiserver_request_total that write.
func isWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		return true
	}
	return false
}

func TestParseRequestTotals(t *testing.T) {
	g := NewWithT(t)
	got := parseRequestTotals(`# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="namespaces",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="namespaces",scope="resource",subresource="",verb="POST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="agent-install.openshift.io",resource="agents",scope="resource",subresource="status",verb="PUT",version="v1beta1"} 7
apiserver_request_total_other{verb="POST"} 9
`)
	g.Expect(got).To(Equal(map[requestKey]float64{
		{"POST", "namespaces", "201"}:                              3,
		{"POST", "namespaces", "409"}:                              1,
		{"PUT", "agents.agent-install.openshift.io/status", "200"}: 7,
	}))
}
