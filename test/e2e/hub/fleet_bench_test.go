package hub

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/installer"
	"github.com/metalshift/metalshift/internal/manifest"
	"github.com/metalshift/metalshift/manager"
)

// Environment of BenchmarkCAPIFleet.
const (
	// benchClustersEnv is the number of clusters installed at once
	// (default 10).
	benchClustersEnv = "METALSHIFT_BENCH_CLUSTERS"
	// benchTimeoutEnv bounds the wait for the installs (default 5m plus
	// 10s a cluster).
	benchTimeoutEnv = "METALSHIFT_BENCH_TIMEOUT"
	// benchAnchorEnv set to 0 skips the upstream anchor.
	benchAnchorEnv = "METALSHIFT_BENCH_ANCHOR"
)

// clustersPerLab is how many clusters' machines one `sim bmc` serves (3
// each: a bootstrap node, a master, a worker; 240 addresses a lab).
const clustersPerLab = 80

// BenchmarkCAPIFleet installs N clusters (a master and a worker each, with
// their bootstrap node) at once through the Cluster API path on one hub:
// `metalshift hub up`, `metalshift sim bmc --api-server in-memory` (the
// fleet twin), and what `metalshift create cluster` runs for each (its
// manifests, applied, waited for until install-complete). It reports the
// wall time from the first apply to the last install-complete, then runs
// the upstream anchor in hack/capi-inmemory-bench (Cluster API core,
// kubeadm bootstrap, KubeadmControlPlane and the in-memory infrastructure
// provider on envtest, N clusters of a control-plane machine and a worker,
// no provisioning delays) and reports its time and the ratio.
func BenchmarkCAPIFleet(b *testing.B) {
	n := envInt(b, benchClustersEnv, 10)
	timeout := 5*time.Minute + time.Duration(n)*10*time.Second
	if v := os.Getenv(benchTimeoutEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("%s: %v", benchTimeoutEnv, err)
		}
		timeout = d
	}
	for range b.N {
		ours := capiFleet(b, n, timeout)
		b.ReportMetric(ours.Seconds(), "s-ours")
		fmt.Printf("BenchmarkCAPIFleet: %d clusters installed (install-complete) in %s on the fleet twin\n", n, ours.Round(time.Millisecond))
		if os.Getenv(benchAnchorEnv) == "0" {
			continue
		}
		anchor := capiAnchor(b, n, timeout)
		b.ReportMetric(anchor.Seconds(), "s-anchor")
		b.ReportMetric(ours.Seconds()/anchor.Seconds(), "ratio")
		fmt.Printf("BenchmarkCAPIFleet: anchor (Cluster API v1.14.2, kubeadm, in-memory provider, envtest): %d clusters running in %s; ours/anchor = %.2f\n",
			n, anchor.Round(time.Millisecond), ours.Seconds()/anchor.Seconds())
	}
}

// capiFleet runs the hub and the simulated machines, installs n clusters
// at once and returns the time from the first apply to the last
// install-complete.
func capiFleet(b *testing.B, n int, timeout time.Duration) time.Duration {
	g := NewWithT(b)
	hubDir := b.TempDir()
	startHub(b, hubDir)
	var hosts []string // per cluster: its hosts file
	var imageURL, imageSum string
	for lab := 0; lab*clustersPerLab < n; lab++ {
		k := min(clustersPerLab, n-lab*clustersPerLab)
		path, url, sum, _ := startSimWith(b, 3*k, "--api-server", "in-memory", "--name-prefix", fmt.Sprintf("fleet%d", lab),
			"--subnet", fmt.Sprintf("198.18.%d", lab), "--mac-octet", fmt.Sprint(0x90+lab))
		hosts = append(hosts, splitHosts(b, path, 3)...)
		imageURL, imageSum = url, sum
	}
	hubClient := fleetHubClient(b, filepath.Join(hubDir, "kubeconfig"))
	dirs := make([]string, n)
	octet := 100 + rand.IntN(100)
	for i := range n {
		dirs[i] = b.TempDir()
		out, err := run(b, "create", "install-config", "--dir", dirs[i], "--name", fmt.Sprintf("fleet-%d", i),
			"--api-vip", fmt.Sprintf("127.%d.%d.%d", octet, i/250, 10+i%250), "--masters", "1", "--workers", "1",
			"--hosts-from", hosts[i], "--os-image-url", imageURL, "--os-image-checksum", imageSum)
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	took := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = createCluster(ctx, hubClient, dirs[i])
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	for i, err := range errs {
		g.Expect(err).NotTo(HaveOccurred(), "cluster fleet-%d", i)
	}
	slices.Sort(took)
	fmt.Printf("BenchmarkCAPIFleet: per cluster: first %s, median %s, last %s\n",
		took[0].Round(time.Millisecond), took[n/2].Round(time.Millisecond), took[n-1].Round(time.Millisecond))
	return wall
}

// createCluster does what `metalshift create cluster --kubeconfig` does
// for the install in dir: write its manifests, apply them to the hub and
// wait for install-complete (its progress lines are dropped).
func createCluster(ctx context.Context, c client.Client, dir string) error {
	ic, _, err := installer.LoadInstallConfig(dir)
	if err != nil {
		return err
	}
	if err := installer.CreateManifests(ctx, dir, io.Discard); err != nil {
		return err
	}
	if err := installer.Apply(ctx, c, dir, ic.Metadata.Name, io.Discard); err != nil {
		return err
	}
	return installer.Wait(ctx, c, ic.Metadata.Name, installer.InstallComplete, io.Discard)
}

// fleetHubClient is a client of the hub as `create cluster` makes it.
func fleetHubClient(tb testing.TB, kubeconfig string) client.Client {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme, err := manager.NewScheme()
	if err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// splitHosts writes the hosts of the manifests at path (a Secret and a
// BareMetalHost each, as `sim bmc --manifests` writes them) into files of
// per hosts each, and returns their paths.
func splitHosts(tb testing.TB, path string, per int) []string {
	objs, err := manifest.DecodeFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	secrets := map[string][]byte{}
	var hosts [][]byte
	for _, u := range objs {
		data, err := manifest.Marshal(u.Object)
		if err != nil {
			tb.Fatal(err)
		}
		switch u.GetKind() {
		case "Secret":
			secrets[u.GetName()] = data
		case "BareMetalHost":
			cred, _, _ := unstructured.NestedString(u.Object, "spec", "bmc", "credentialsName")
			hosts = append(hosts, append(append(slices.Clone(secrets[cred]), "---\n"...), data...))
		}
	}
	var files []string
	for i := 0; i+per <= len(hosts); i += per {
		f := filepath.Join(filepath.Dir(path), fmt.Sprintf("hosts-%d.yaml", i/per))
		if err := os.WriteFile(f, bytes.Join(hosts[i:i+per], []byte("---\n")), 0o600); err != nil {
			tb.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// capiAnchor builds and runs hack/capi-inmemory-bench's install mode for n
// clusters and returns the time it printed.
func capiAnchor(b *testing.B, n int, timeout time.Duration) time.Duration {
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "hack", "capi-inmemory-bench"))
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "capi-inmemory-bench")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the anchor: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-mode", "install", "-clusters", fmt.Sprint(n), "-timeout", timeout.String())
	cmd.Dir = dir // it finds Cluster API's CRDs with `go list -m`
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+toolsDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("the anchor: %v\n%s%s", err, out, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != "RESULT" || f[1] != "install" {
			continue
		}
		if s, ok := strings.CutPrefix(f[3], "seconds="); ok {
			secs, err := strconv.ParseFloat(s, 64)
			if err != nil {
				b.Fatal(err)
			}
			return time.Duration(secs * float64(time.Second))
		}
	}
	b.Fatalf("the anchor printed no RESULT line:\n%s", out)
	return 0
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: a positive number", name, v)
	}
	return n
}
