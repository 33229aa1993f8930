package localcp

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// writeArchive writes a gzipped tar of entries (name, content) to a file.
func writeArchive(t *testing.T, entries ...[2]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "backup")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := addBytes(tw, e[0], []byte(e[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []interface{ Close() error }{tw, gz, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestRestoreRefuses: restore writes nothing outside the new directory,
// takes only a whole backup, and leaves no directory behind when it fails;
// a directory that is not empty is never restored into.
func TestRestoreRefuses(t *testing.T) {
	manifest := [2]string{backupManifestName, `{"format":1}`}
	state := [2]string{"hub.json", `{"phase":"Stopped"}`}
	for name, tc := range map[string]struct {
		entries [][2]string
		err     string
	}{
		"an entry outside pki/": {
			entries: [][2]string{manifest, state, {"pki/../../escaped", "x"}},
			err:     `unexpected entry "pki/../../escaped"`,
		},
		"a nested entry": {
			entries: [][2]string{manifest, state, {"pki/sub/ca.key", "x"}},
			err:     `unexpected entry "pki/sub/ca.key"`,
		},
		"no snapshot": {
			entries: [][2]string{manifest, state, {"pki/ca.crt", "x"}, {"pki/ca.key", "x"}},
			err:     "no etcd.db in the archive: not a metalshift hub backup",
		},
		"another format": {
			entries: [][2]string{{backupManifestName, `{"format":2}`}},
			err:     "backup format 2: this metalshift reads format 1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			parent := t.TempDir()
			dir := filepath.Join(parent, "new")
			_, err := Restore(writeArchive(t, tc.entries...), dir)
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			g.Expect(dir).NotTo(BeAnExistingFile(), "a failed restore leaves no directory")
			entries, err := os.ReadDir(parent)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(entries).To(BeEmpty())
		})
	}
	t.Run("a directory that is not empty", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(dir, "hub.json"), []byte("{}"), 0o600)).To(Succeed())
		_, err := Restore(writeArchive(t, manifest), dir)
		g.Expect(err).To(MatchError(ContainSubstring("is not empty: restore into a new directory")))
		g.Expect(filepath.Join(dir, "hub.json")).To(BeAnExistingFile())
	})
}
