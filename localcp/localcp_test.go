package localcp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/config"
)

func startHub(t *testing.T, dir string) *Hub {
	t.Helper()
	h, err := Start(context.Background(), Options{Dir: dir, BinDir: binDir(t), CRDs: everyCRD(t)})
	if err != nil {
		t.Fatalf("starting hub in %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range h.procs {
				t.Logf("last lines of %s:\n%s", p.logPath, p.logTail(30))
			}
		}
	})
	return h
}

// everyCRD returns the CRDs of config: metalshift's and Cluster API's.
func everyCRD(t testing.TB) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := config.CRDs(config.OwnCRDs, config.CAPICRDs)
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

func binDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(d, b)); err != nil {
			t.Fatalf("%s is missing from %s: run `make tools`", b, d)
		}
	}
	return d
}

// kubeconfigClient builds a client the way a user does: from the kubeconfig file.
func kubeconfigClient(t *testing.T, path string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func childPIDs(t *testing.T, dir string) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	var pids []int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestStartStopResume starts a hub, uses it through its kubeconfig, stops
// it, and starts it again on the same directory: the data and the old
// kubeconfig still work, and no child outlives a stop.
func TestStartStopResume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()

	h := startHub(t, dir)
	pids := childPIDs(t, dir)
	g.Expect(pids).To(HaveLen(3), "etcd, kube-apiserver and kube-controller-manager")
	c := kubeconfigClient(t, h.Kubeconfig())

	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(c.List(ctx, crds)).To(Succeed())
	var names []string
	for _, crd := range crds.Items {
		names = append(names, crd.Name)
	}
	g.Expect(names).To(ContainElements("clusters.cluster.x-k8s.io", "machines.cluster.x-k8s.io",
		"machinesets.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io", "machinehealthchecks.cluster.x-k8s.io",
		"metalclusters.infrastructure.cluster.x-k8s.io"))

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	g.Expect(c.Create(ctx, owner)).To(Succeed())
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", Namespace: "default", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
	}}}}
	g.Expect(c.Create(ctx, dependent)).To(Succeed())
	g.Expect(c.Delete(ctx, owner)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(dependent), dependent))
	}, 30*time.Second).Should(BeTrue(), "kube-controller-manager collects garbage as on a real hub")

	keep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: "default"}, Data: map[string]string{"run": "1"}}
	g.Expect(c.Create(ctx, keep)).To(Succeed())
	firstServer := h.Server()

	h.Stop()
	for _, pid := range pids {
		g.Expect(Alive(pid)).To(BeFalse(), "child %d outlived Stop", pid)
	}
	st, err := ReadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Phase).To(Equal(PhaseStopped))

	h = startHub(t, dir)
	defer h.Stop()
	g.Expect(h.Server()).To(Equal(firstServer), "a resumed hub keeps its ports while they are free")
	c = kubeconfigClient(t, h.Kubeconfig())
	got := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(keep), got)).To(Succeed())
	g.Expect(got.Data).To(HaveKeyWithValue("run", "1"))
}

// TestTwoHubsAndAlreadyRunning runs two hubs side by side and refuses a
// second hub on a directory in use, saying how to use or stop the first.
func TestTwoHubsAndAlreadyRunning(t *testing.T) {
	g := NewWithT(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startHub(t, dirA)
	defer a.Stop()
	b := startHub(t, dirB)
	defer b.Stop()
	g.Expect(a.Server()).NotTo(Equal(b.Server()))
	for _, h := range []*Hub{a, b} {
		ns := &corev1.NamespaceList{}
		g.Expect(kubeconfigClient(t, h.Kubeconfig()).List(context.Background(), ns)).To(Succeed())
	}

	_, err := Start(context.Background(), Options{Dir: dirA, BinDir: binDir(t)})
	g.Expect(errors.Is(err, ErrAlreadyRunning)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("hub down --dir " + a.Dir()))
	g.Expect(Running(dirA)).To(BeTrue(), "the failed start must not disturb the running hub")
	ns := &corev1.NamespaceList{}
	g.Expect(kubeconfigClient(t, a.Kubeconfig()).List(context.Background(), ns)).To(Succeed())
}

// TestStartFailsCleanly reports a missing binary with what to do, and
// leaves nothing running and the directory unlocked.
func TestStartFailsCleanly(t *testing.T) {
	g := NewWithT(t)
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	t.Setenv("METALSHIFT_BIN_DIR", "")
	t.Setenv("KUBEBUILDER_ASSETS", "")
	dir := t.TempDir()
	// Only etcd is available: kube-apiserver is missing.
	g.Expect(os.Symlink(filepath.Join(binDir(t), "etcd"), filepath.Join(empty, "etcd"))).To(Succeed())

	_, err := Start(context.Background(), Options{Dir: dir, BinDir: empty})
	g.Expect(err).To(MatchError(ContainSubstring("kube-apiserver not found")))
	g.Expect(err).To(MatchError(ContainSubstring("make tools")))
	g.Expect(Running(dir)).To(BeFalse())
	g.Expect(childPIDs(t, dir)).To(BeEmpty(), "etcd was stopped")
}
