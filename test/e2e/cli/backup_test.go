package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const backupObjects = `apiVersion: v1
kind: Secret
metadata:
  name: bmc-secret
  namespace: default
stringData:
  username: admin
  password: kept-in-the-backup
---
apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata:
  name: host-0
  namespace: default
spec:
  online: false
  bootMACAddress: "52:54:00:00:00:01"
  bmc:
    address: redfish+http://127.0.0.1:8000/redfish/v1/Systems/1
    credentialsName: bmc-secret
`

// TestHubBackupRestore: objects of a running hub are in a backup (0600),
// which restores into a new directory whose `hub up` serves them, with
// the same CA.
func TestHubBackupRestore(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	h := hubUp(t, dir)
	out, err := kubectl(t, dir, backupObjects, "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)

	backup := filepath.Join(t.TempDir(), "hub.backup")
	out, err = metalshift(t, "hub", "backup", "--dir", dir, "--out", backup)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("etcd snapshot"))
	info, err := os.Stat(backup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)), "the backup holds the hub's secrets")

	out, err = metalshift(t, "hub", "down", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(h.wait(t, time.Minute)).To(Succeed())

	restored := filepath.Join(t.TempDir(), "restored")
	out, err = metalshift(t, "hub", "restore", "--from", backup, "--dir", restored)
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = metalshift(t, "hub", "restore", "--from", backup, "--dir", restored)
	g.Expect(err).To(HaveOccurred(), "a directory with a hub is not overwritten")
	g.Expect(out).To(ContainSubstring("not empty"))

	hubUp(t, restored)
	out, err = kubectl(t, restored, "", "get", "secret", "bmc-secret", "-n", "default", "-o", "jsonpath={.data.password}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("a2VwdC1pbi10aGUtYmFja3Vw")) // kept-in-the-backup
	out, err = kubectl(t, restored, "", "get", "baremetalhost", "host-0", "-n", "default", "-o", "jsonpath={.spec.bmc.credentialsName}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("bmc-secret"))
	for _, f := range []string{"ca.crt", "ca.key", "sa.key", "deploy-signing.key"} {
		was, err := os.ReadFile(filepath.Join(dir, "pki", f))
		g.Expect(err).NotTo(HaveOccurred())
		is, err := os.ReadFile(filepath.Join(restored, "pki", f))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(is).To(Equal(was), "pki/%s is the backed-up hub's", f)
	}
}
