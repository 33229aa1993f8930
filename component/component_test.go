package component

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestComplete(t *testing.T) {
	dir := t.TempDir()
	key, short := filepath.Join(dir, "key"), filepath.Join(dir, "short")
	if err := os.WriteFile(key, make([]byte, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	// needsKey is a component whose server needs the signing key.
	needsKey := Component{Name: "server", Complete: func(hub *Options) error {
		if len(hub.SigningKey) == 0 {
			return errors.New("--signing-key-file is required with --server")
		}
		return nil
	}}
	failing := Component{Name: "other", Complete: func(*Options) error { return errors.New("--other is wrong") }}
	tests := []struct {
		name       string
		keyFile    string
		components []Component
		wantKey    int
		wantErrs   []string
	}{
		{name: "no key, none needed", components: []Component{{Name: "no-flags"}}},
		{name: "key read", keyFile: key, components: []Component{needsKey}, wantKey: 32},
		{name: "key needed", components: []Component{needsKey}, wantErrs: []string{"--signing-key-file is required with --server"}},
		{name: "key too short", keyFile: short, components: []Component{needsKey}, wantErrs: []string{"short: a signing key needs at least 32 bytes, it has 9"}},
		{name: "key missing", keyFile: filepath.Join(dir, "missing"), wantErrs: []string{"no such file"}},
		{name: "every component's error", components: []Component{needsKey, failing}, wantErrs: []string{"--signing-key-file is required", "--other is wrong"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			opts := &Options{SigningKeyFile: tt.keyFile}
			err := Complete(opts, tt.components)
			if len(tt.wantErrs) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(opts.SigningKey).To(HaveLen(tt.wantKey))
				return
			}
			for _, want := range tt.wantErrs {
				g.Expect(err).To(MatchError(ContainSubstring(want)))
			}
		})
	}
}

// TestBindFlags binds the hub-wide flags and each component's. (The
// manager's whole command line is checked in package manager.)
func TestBindFlags(t *testing.T) {
	g := NewWithT(t)
	var (
		opts Options
		own  string
	)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	BindFlags(fs, &opts, []Component{{Name: "c", Flags: func(fs *pflag.FlagSet) { fs.StringVar(&own, "own", "x", "") }}, {Name: "no-flags"}})
	g.Expect(fs.Parse([]string{"--watch-filter=shard-1", "--webhook-port=0", "--own=y"})).To(Succeed())
	g.Expect(opts.WatchFilterValue).To(Equal("shard-1"))
	g.Expect(opts.WebhookPort).To(BeZero())
	g.Expect(opts.MetricsAddr).To(Equal(":8080"))
	g.Expect(own).To(Equal("y"))
}

func TestNewScheme(t *testing.T) {
	g := NewWithT(t)
	base, err := NewScheme(Component{Name: "no-types"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(base.Recognizes(clusterv1.GroupVersion.WithKind("Cluster"))).To(BeTrue(), "the ClusterCache watches Clusters")
	g.Expect(base.Recognizes(clusterv1.GroupVersion.WithKind("Machine"))).To(BeTrue())

	core, err := NewScheme(CAPICore)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(core.Recognizes(clusterv1.GroupVersion.WithKind("MachineDrainRule"))).To(BeTrue())
	g.Expect(core.Recognizes(clusterv1.GroupVersion.WithKind("Cluster").GroupKind().WithVersion("v1beta1"))).To(BeTrue(), "old versions are served")

	_, err = NewScheme(Component{Name: "broken", AddToScheme: func(*runtime.Scheme) error { return errors.New("boom") }})
	g.Expect(err).To(MatchError("component broken: boom"))
}

// TestSelect: --components picks components by name in the manager's
// order, all when empty, and an unknown name is refused with the known ones.
func TestSelect(t *testing.T) {
	g := NewWithT(t)
	all := []Component{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	picked, err := Select(all, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(picked).To(HaveLen(3))
	picked, err = Select(all, []string{"c", " a"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{picked[0].Name, picked[1].Name}).To(Equal([]string{"a", "c"}))
	_, err = Select(all, []string{"a", "d"})
	g.Expect(err).To(MatchError("--components: unknown d; the components are a, b, c"))
}
