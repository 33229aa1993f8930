package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/cluster"
)

func TestParseAPIServer(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    cluster.APIServer
		wantErr string
	}{
		{name: "the default is a real kube-apiserver", value: "kube-apiserver", want: cluster.KubeAPIServer},
		{name: "in-memory is the fleet twin", value: "in-memory", want: cluster.InMemoryAPIServer},
		{name: "anything else names both choices", value: "inmemory", wantErr: `--api-server "inmemory": kube-apiserver or in-memory`},
		{name: "empty is refused too", value: "", wantErr: "kube-apiserver or in-memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parseAPIServer(tt.value)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestSimBMCDefaultsToKubeAPIServer(t *testing.T) {
	g := NewWithT(t)
	bmc, _, err := newSimCommand().Find([]string{"bmc"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bmc.Flags().Lookup("api-server").DefValue).To(Equal("kube-apiserver"))
}

// TestWriteWhole: the manifests and image env files appear whole, by a
// rename: an existing file is replaced, and no partial file is left
// beside it. (A benchmark reading the hosts of 120 machines as soon as the
// file existed read it half written.)
func TestWriteWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts.yaml")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("kind: BareMetalHost\n---\n"), 200000)
	// A reader reading while the file is written again and again sees the
	// old file or the new one, never a part: a file written in place is
	// empty, then partial, while it is written.
	stop, torn := make(chan struct{}), make(chan int, 1)
	go func() {
		defer close(torn)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got, err := os.ReadFile(path); err == nil && string(got) != "old" && !bytes.Equal(got, data) {
				torn <- len(got)
				return
			}
		}
	}()
	for range 20 {
		if err := writeWhole(path, data); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if n, ok := <-torn; ok {
		t.Fatalf("a reader read %d bytes of a %d-byte file being written", n, len(data))
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(data))
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the directory holds %v (%v), want hosts.yaml alone", entries, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600: it holds BMC passwords", fi.Mode(), err)
	}
}
