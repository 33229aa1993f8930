package boot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ignitionconfig "github.com/coreos/ignition/v2/config"
	"github.com/vincent-petithory/dataurl"
)

// ApplyIgnition applies what of an Ignition 3.x config (an InfraEnv's
// ignitionConfigOverride) a live environment without systemd can: its
// directories, files with inline (data URL) contents, links, and users' SSH
// keys (/root/.ssh for root, /home/<user>/.ssh otherwise), under root. It
// logs what it leaves out (units, disks, remote contents) rather than
// failing the boot for it.
func ApplyIgnition(root string, raw []byte, logf Logf) error {
	cfg, _, err := ignitionconfig.Parse(raw)
	if err != nil {
		return fmt.Errorf("ignitionConfigOverride: %w", err)
	}
	var errs []error
	for _, d := range cfg.Storage.Directories {
		errs = append(errs, os.MkdirAll(under(root, d.Path), mode(d.Mode, 0o755)))
	}
	for _, f := range cfg.Storage.Files {
		var data []byte
		if src := f.Contents.Source; src != nil && *src != "" {
			u, err := dataurl.DecodeString(*src)
			if err != nil {
				logf("Ignition override: %s: only data URLs are applied in the discovery environment", f.Path)
				continue
			}
			data = u.Data
		}
		p := under(root, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), parentMode); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.WriteFile(p, data, mode(f.Mode, 0o644)))
	}
	for _, l := range cfg.Storage.Links {
		p := under(root, l.Path)
		if err := os.MkdirAll(filepath.Dir(p), parentMode); err != nil {
			errs = append(errs, err)
			continue
		}
		_ = os.Remove(p)
		if l.Target != nil {
			errs = append(errs, os.Symlink(*l.Target, p))
		}
	}
	for _, u := range cfg.Passwd.Users {
		if len(u.SSHAuthorizedKeys) == 0 {
			continue
		}
		home := "/home/" + u.Name
		if u.Name == "root" {
			home = "/root"
		}
		dir := under(root, home+"/.ssh")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			errs = append(errs, err)
			continue
		}
		var keys []string
		for _, k := range u.SSHAuthorizedKeys {
			keys = append(keys, string(k))
		}
		errs = append(errs, os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte(strings.Join(keys, "\n")+"\n"), 0o600))
	}
	if n := len(cfg.Systemd.Units); n > 0 {
		logf("Ignition override: %d systemd units not started: the discovery environment runs no systemd", n)
	}
	if len(cfg.Storage.Disks)+len(cfg.Storage.Filesystems)+len(cfg.Storage.Raid)+len(cfg.Storage.Luks) > 0 {
		logf("Ignition override: disks, filesystems, RAID and LUKS are not applied in the discovery environment")
	}
	return errors.Join(errs...)
}

// parentMode is the mode of the directories made for a file or link the
// config does not list: world-readable, like /etc on the live image.
const parentMode = 0o755

// under joins an absolute path of the config to root.
func under(root, p string) string {
	return filepath.Join(root, filepath.Clean("/"+p))
}

func mode(m *int, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m) & fs.ModePerm //nolint:gosec // a file mode from the config
}
