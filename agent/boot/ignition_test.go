package boot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestApplyIgnition(t *testing.T) {
	root := t.TempDir()
	var logged []string
	logf := func(format string, args ...any) { logged = append(logged, format) }
	cfg := `{"ignition":{"version":"3.2.0"},
	"storage":{"directories":[{"path":"/etc/extra","mode":448}],
	  "files":[{"path":"/etc/motd","mode":420,"contents":{"source":"data:,hello%20lab%0A"}},
	           {"path":"/etc/remote","contents":{"source":"https://example.com/x"}}],
	  "links":[{"path":"/etc/latest","target":"/etc/motd"}]},
	"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA a@b"]}]},
	"systemd":{"units":[{"name":"x.service","enabled":true}]}}`
	if err := ApplyIgnition(root, []byte(cfg), logf); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/motd")); err != nil || string(b) != "hello lab\n" {
		t.Errorf("/etc/motd: %q, %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(root, "etc/extra")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("/etc/extra: %v, %v", st, err)
	}
	if target, err := os.Readlink(filepath.Join(root, "etc/latest")); err != nil || target != "/etc/motd" {
		t.Errorf("/etc/latest: %q, %v", target, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "home/core/.ssh/authorized_keys")); err != nil || string(b) != "ssh-ed25519 AAAA a@b\n" {
		t.Errorf("authorized_keys: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/remote")); !os.IsNotExist(err) {
		t.Errorf("a remote source was applied: %v", err)
	}
	if got := strings.Join(logged, "|"); !strings.Contains(got, "only data URLs") || !strings.Contains(got, "systemd units") {
		t.Errorf("logged %q", got)
	}
	// Ignition refuses paths that are not clean; under keeps any inside the root.
	if err := ApplyIgnition(root, []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/../../escape","contents":{"source":"data:,x"}}]}}`), logf); err == nil {
		t.Error("a config with an unclean path was applied")
	}
	if got := under(root, "/../../escape"); got != filepath.Join(root, "escape") {
		t.Errorf("under: %s", got)
	}
	if err := ApplyIgnition(root, []byte(`{"ignition":{"version":"9.9.9"}}`), logf); err == nil {
		t.Error("an invalid config was applied")
	}
}
