package localcp

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	etcdutlsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// A backup of a hub is a gzipped tar archive holding:
//
//   - backupManifestName: what the archive is (BackupManifest);
//   - backupSnapshotName: an etcd snapshot, every object of the hub;
//   - pki/: the hub's CA and keys (the service-account and deploy signing
//     keys among them) and its certificates, so that machines booted with
//     the hub CA, agents holding tokens it signed and kubeconfigs it wrote
//     keep working with the restored hub;
//   - hub.json: the ports of the hub (State), which the restored hub takes
//     again where they are free, so that hosts find its servers where they
//     were.
//
// Kubeconfigs, logs and the run directory are not kept: a start writes
// them anew.
const (
	backupManifestName = "metalshift-hub-backup.json"
	backupSnapshotName = "etcd.db"
	backupFormat       = 1
)

// BackupManifest describes a backup archive.
type BackupManifest struct {
	// Format is the archive's layout version.
	Format int `json:"format"`
	// Created is when the backup was taken.
	Created time.Time `json:"created"`
	// Dir is the directory of the hub it was taken from.
	Dir string `json:"dir"`
	// SnapshotVersion is the etcd version the snapshot reports (its storage version);
	// empty for a copy of the data of a stopped hub.
	SnapshotVersion string `json:"snapshotVersion,omitempty"`
	// Copied tells that the snapshot is a copy of a stopped hub's etcd
	// database, which carries no integrity hash.
	Copied bool `json:"copied,omitempty"`
}

// etcdMemberName is the name of the hub's etcd member (see Hub.etcd).
const etcdMemberName = "metalshift-hub"

// Backup writes a backup of the hub in dir to out (mode 0600, replacing
// out atomically): an etcd snapshot taken through etcd's client API while
// the hub runs, or a copy of its database when it is stopped, with the
// hub's keys, certificates and ports. The archive holds every secret of
// the hub.
func Backup(ctx context.Context, dir, out string) (BackupManifest, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return BackupManifest{}, err
	}
	st, err := ReadState(dir)
	if err != nil {
		return BackupManifest{}, fmt.Errorf("no hub in %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(absOr(out)), ".metalshift-backup-")
	if err != nil {
		return BackupManifest{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	m := BackupManifest{Format: backupFormat, Dir: dir}
	db := filepath.Join(tmp, backupSnapshotName)
	if Running(dir) {
		if m.SnapshotVersion, err = snapshotEtcd(ctx, dir, st.Ports, db); err != nil {
			return m, fmt.Errorf("taking an etcd snapshot of the hub in %s: %w", dir, err)
		}
	} else {
		// etcd is stopped with the hub: its database is consistent.
		if err := copyFile(filepath.Join(dir, "etcd", "member", "snap", "db"), db); err != nil {
			return m, fmt.Errorf("copying the etcd database of the stopped hub in %s: %w", dir, err)
		}
		m.Copied = true
	}
	m.Created = time.Now().UTC().Truncate(time.Second)
	if err := writeBackup(dir, out, tmp, db, m, st.Ports); err != nil {
		return m, err
	}
	return m, nil
}

func absOr(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// snapshotEtcd saves a snapshot of the hub's etcd to db, with the client
// certificate kube-apiserver uses; it returns the snapshot's version.
func snapshotEtcd(ctx context.Context, dir string, p Ports, db string) (string, error) {
	keys := pki{dir: filepath.Join(dir, "pki")}
	caPEM, err := os.ReadFile(keys.cert("ca"))
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return "", errors.New("reading the hub CA")
	}
	cert, err := tls.LoadX509KeyPair(keys.cert("apiserver-etcd-client"), keys.key("apiserver-etcd-client"))
	if err != nil {
		return "", err
	}
	cfg := clientv3.Config{
		Endpoints:   []string{"https://127.0.0.1:" + strconv.Itoa(p.EtcdClient)},
		DialTimeout: 10 * time.Second,
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Logger:      zap.NewNop(),
	}
	return clientsnapshot.SaveWithVersion(ctx, zap.NewNop(), cfg, db)
}

// writeBackup writes the archive to a file next to out, then renames it.
func writeBackup(dir, out, tmp, db string, m BackupManifest, p Ports) (reterr error) {
	f, err := os.CreateTemp(filepath.Dir(absOr(out)), ".metalshift-backup-*.tar.gz")
	if err != nil {
		return err
	}
	defer func() {
		if reterr != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	state, err := json.MarshalIndent(State{Phase: PhaseStopped, Ports: p}, "", "  ")
	if err != nil {
		return err
	}
	if err := addBytes(tw, backupManifestName, append(manifest, '\n')); err != nil {
		return err
	}
	if err := addBytes(tw, "hub.json", append(state, '\n')); err != nil {
		return err
	}
	if err := addFile(tw, backupSnapshotName, db); err != nil {
		return err
	}
	pkiDir := filepath.Join(dir, "pki")
	err = filepath.WalkDir(pkiDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return addFile(tw, filepath.ToSlash(rel), p)
	})
	if err != nil {
		return fmt.Errorf("adding the hub's keys and certificates: %w", err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}

func addBytes(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func addFile(tw *tar.Writer, name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	mode := int64(info.Mode().Perm() & 0o644) // keys 0600, certificates 0644
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: info.Size(), ModTime: info.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// Restore makes dir, which must not exist or be empty, the directory of a
// stopped hub with the objects, keys, certificates and ports of the backup
// from; `hub up --dir dir` then resumes it. The etcd data directory is
// rebuilt from the snapshot with etcd's own restore, as a new one-member
// cluster.
func Restore(from, dir string) (BackupManifest, error) {
	var m BackupManifest
	dir, err := filepath.Abs(dir)
	if err != nil {
		return m, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return m, fmt.Errorf("%s is not empty: restore into a new directory", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return m, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir) // it was empty or missing
		}
	}()
	tmp, err := os.MkdirTemp(dir, ".restore-")
	if err != nil {
		return m, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	st, err := extractBackup(from, dir, tmp, &m)
	if err != nil {
		return m, fmt.Errorf("reading the backup %s: %w", from, err)
	}
	peer := "http://127.0.0.1:" + strconv.Itoa(st.Ports.EtcdPeer)
	err = etcdutlsnapshot.NewV3(zap.NewNop()).Restore(etcdutlsnapshot.RestoreConfig{
		SnapshotPath:        filepath.Join(tmp, backupSnapshotName),
		Name:                etcdMemberName,
		OutputDataDir:       filepath.Join(dir, "etcd"),
		PeerURLs:            []string{peer},
		InitialCluster:      etcdMemberName + "=" + peer,
		InitialClusterToken: "etcd-cluster", // etcd's default, as the hub's etcd runs
		SkipHashCheck:       m.Copied,
	})
	if err != nil {
		return m, fmt.Errorf("restoring the etcd snapshot: %w", err)
	}
	if err := writeState(dir, State{Phase: PhaseStopped, Ports: st.Ports}); err != nil {
		return m, err
	}
	ok = true
	return m, nil
}

// extractBackup reads the archive from: the manifest into m, the snapshot
// into tmp, pki/ into dir; it returns the recorded state.
func extractBackup(from, dir, tmp string, m *BackupManifest) (State, error) {
	var st State
	f, err := os.Open(from)
	if err != nil {
		return st, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return st, err
	}
	tr := tar.NewReader(gz)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, err
		}
		name := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg {
			return st, fmt.Errorf("unexpected entry %q", h.Name)
		}
		switch {
		case name == backupManifestName:
			if err := json.NewDecoder(tr).Decode(m); err != nil {
				return st, fmt.Errorf("%s: %w", name, err)
			}
			if m.Format != backupFormat {
				return st, fmt.Errorf("backup format %d: this metalshift reads format %d", m.Format, backupFormat)
			}
		case name == "hub.json":
			if err := json.NewDecoder(tr).Decode(&st); err != nil {
				return st, fmt.Errorf("%s: %w", name, err)
			}
		case name == backupSnapshotName:
			if err := writeFrom(tr, filepath.Join(tmp, backupSnapshotName), 0o600); err != nil {
				return st, err
			}
		case strings.HasPrefix(name, "pki/") && !strings.Contains(name[len("pki/"):], "/") && name != "pki/":
			if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
				return st, err
			}
			if err := writeFrom(tr, filepath.Join(dir, filepath.FromSlash(name)), fileMode(h.Mode)); err != nil {
				return st, err
			}
		default:
			return st, fmt.Errorf("unexpected entry %q", h.Name)
		}
		seen[name] = true
	}
	for _, want := range []string{backupManifestName, "hub.json", backupSnapshotName, "pki/ca.crt", "pki/ca.key"} {
		if !seen[want] {
			return st, fmt.Errorf("no %s in the archive: not a metalshift hub backup", want)
		}
	}
	return st, nil
}

func writeFrom(r io.Reader, dst string, mode os.FileMode) error {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// fileMode is the mode of a restored file: a key's 0600 or a certificate's
// 0644, nothing wider.
func fileMode(m int64) os.FileMode {
	if m&0o044 != 0 {
		return 0o644
	}
	return 0o600
}
