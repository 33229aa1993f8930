package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestMachineOnSimulatedHost is the vertical path through every layer that
// exists today, driven as a user would: on a hub with simulated hardware, a
// Cluster API Machine with an OpenShiftConfig and a MetalMachine claims a
// BareMetalHost, which the host engine provisions over Redfish with the
// Machine's Ignition as user data; upstream Cluster API moves the Machine
// Pending → Provisioning → Provisioned.
func TestMachineOnSimulatedHost(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	hubUp(t, dir)
	work := t.TempDir()

	sim := exec.Command(metalshiftBin, "sim", "bmc", "--hosts", "2", "--hub-dir", dir, "--namespace", "e2e", "--manifests", filepath.Join(work, "hosts.yaml"))
	img := exec.Command(metalshiftBin, "sim", "image", "--size", "4Mi", "--env", filepath.Join(work, "image.env"))
	for _, c := range []*exec.Cmd{sim, img} {
		g.Expect(c.Start()).To(Succeed())
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	g.Eventually(func() error { _, err := os.Stat(filepath.Join(work, "hosts.yaml")); return err }, 10*time.Second).Should(Succeed())
	var env []byte
	g.Eventually(func() string { env, _ = os.ReadFile(filepath.Join(work, "image.env")); return string(env) }, 10*time.Second).Should(ContainSubstring("IMAGE_SHA256="))
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}

	out, err := kubectl(t, dir, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: e2e\n", "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl(t, dir, "", "apply", "-f", filepath.Join(work, "hosts.yaml"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl(t, dir, clusterManifests(t, vars["IMAGE_URL"], vars["IMAGE_SHA256"]), "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)

	var phases []string
	g.Eventually(func(g Gomega) {
		out, err := kubectl(t, dir, "", "-n", "e2e", "get", "machine", "master-0", "-o", "jsonpath={.status.phase}")
		g.Expect(err).NotTo(HaveOccurred())
		if p := strings.TrimSpace(out); p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
		}
		g.Expect(phases).To(ContainElement("Provisioned"))
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Expect(phases).To(Equal([]string{"Pending", "Provisioning", "Provisioned"}))

	out, err = kubectl(t, dir, "", "-n", "e2e", "get", "bmh", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`host-0\s+provisioned\s+master-0\s+true`), "the claimed host shows its consumer")
	g.Expect(out).To(MatchRegexp(`host-1\s+available\s+false`))
	out, err = kubectl(t, dir, "", "-n", "e2e", "get", "machine", "master-0", "-o", "jsonpath={.spec.providerID}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(HavePrefix("metal3://e2e/host-0/"))

	out, err = kubectl(t, dir, "", "-n", "e2e", "delete", "machine", "master-0", "--wait=true", "--timeout=60s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func(g Gomega) {
		out, err := kubectl(t, dir, "", "-n", "e2e", "get", "bmh", "host-0", "--no-headers")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(MatchRegexp(`host-0\s+available\s+false`))
	}, 2*time.Minute).Should(Succeed(), "deleting the Machine deprovisions and frees its host")
}

func clusterManifests(t *testing.T, imageURL, sha string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	crt := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	k := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: e2e-ca, namespace: e2e, labels: {cluster.x-k8s.io/cluster-name: e2e}}
data: {tls.crt: %s, tls.key: %s}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: MetalCluster
metadata: {name: e2e, namespace: e2e}
spec: {controlPlaneEndpoint: {host: 192.0.2.10, port: 6443}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: e2e, namespace: e2e}
spec:
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: MetalCluster, name: e2e}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1alpha1
kind: OpenShiftConfig
metadata: {name: master-0, namespace: e2e, labels: {cluster.x-k8s.io/cluster-name: e2e}}
spec: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: MetalMachine
metadata: {name: master-0, namespace: e2e, labels: {cluster.x-k8s.io/cluster-name: e2e}}
spec:
  image: {url: "%s", checksum: "%s", checksumType: sha256}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata: {name: master-0, namespace: e2e, labels: {cluster.x-k8s.io/cluster-name: e2e, cluster.x-k8s.io/control-plane: ""}}
spec:
  clusterName: e2e
  bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: OpenShiftConfig, name: master-0}}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: MetalMachine, name: master-0}
`, crt, k, imageURL, sha)
}
