package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/sim/equinix"
)

// syncBuffer is a buffer the command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSimEquinix: `sim equinix` serves the API with the key of
// --token-file and a project, prints their URLs and the project, says
// where the ledger is, and stops when its context ends.
func TestSimEquinix(t *testing.T) {
	g := NewWithT(t)
	keyFile := filepath.Join(t.TempDir(), "key")
	g.Expect(os.WriteFile(keyFile, []byte("the-key\n"), 0o600)).To(Succeed())
	o := &simEquinixOptions{}
	cmd := simEquinixCommand(o)
	g.Expect(cmd.Flags().Parse([]string{"--token-file", keyFile, "--project", "demo", "--faults", "seed=3,equinix.failed=@1"})).To(Succeed())
	started := make(chan *equinix.Server, 1)
	o.started = started
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cmd.SetContext(ctx)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	go func() { done <- cmd.RunE(cmd, nil) }()
	var s *equinix.Server
	select {
	case s = <-started:
	case err := <-done:
		t.Fatalf("the command ended: %v; stderr: %s", err, stderr.String())
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	g.Expect(vars).To(HaveKeyWithValue("METAL_API_URL", s.APIURL()))
	g.Expect(vars).To(HaveKeyWithValue("METAL_METADATA_URL", s.MetadataURL()))
	g.Expect(vars).NotTo(HaveKey("METAL_AUTH_TOKEN"), "the key was given")
	g.Expect(stderr.String()).To(ContainSubstring("/_ledger"))
	g.Expect(stderr.String()).To(ContainSubstring("Fault plan: seed=3,equinix.failed=@1"))

	req, _ := http.NewRequest("GET", vars["METAL_API_URL"]+"/projects/"+vars["METAL_PROJECT_ID"], nil)
	req.Header.Set(equinixapi.AuthHeader, "the-key")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	var p equinixapi.Project
	g.Expect(json.NewDecoder(resp.Body).Decode(&p)).To(Succeed())
	resp.Body.Close()
	g.Expect(p.Name).To(Equal("demo"))

	cancel()
	g.Expect(<-done).To(Succeed())
	g.Expect(stderr.String()).To(ContainSubstring("Stopping"))
}

// TestSimEquinixFlagErrors: bad flags are refused before anything starts.
func TestSimEquinixFlagErrors(t *testing.T) {
	g := NewWithT(t)
	for args, want := range map[string]string{
		"--token=a --token-file=b":   "exclusive",
		"--token-file=/nonexistent":  "--token-file",
		"--private-block=127.64.0.0": "--private-block",
		"--faults=equinix.5xx=@0":    "--faults",
		"--rate-limit=0":             "--rate-limit",
	} {
		o := &simEquinixOptions{}
		cmd := simEquinixCommand(o)
		g.Expect(cmd.Flags().Parse(strings.Fields(args))).To(Succeed())
		err := o.run(context.Background(), &bytes.Buffer{}, &bytes.Buffer{})
		g.Expect(err).To(MatchError(ContainSubstring(want)), args)
	}
}
