package localcp

import (
	"crypto/x509"
	"os"
	"testing"

	. "github.com/onsi/gomega"
)

func TestEnsurePKIKeepsExistingMaterial(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p, err := ensurePKI(dir)
	g.Expect(err).NotTo(HaveOccurred())
	ca, err := os.ReadFile(p.cert("ca"))
	g.Expect(err).NotTo(HaveOccurred())
	admin, err := os.ReadFile(p.cert("admin"))
	g.Expect(err).NotTo(HaveOccurred())

	p, err = ensurePKI(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.ReadFile(p.cert("ca"))).To(Equal(ca))
	g.Expect(os.ReadFile(p.cert("admin"))).To(Equal(admin))

	caCert, err := readCert(p.cert("ca"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, spec := range leafCerts {
		cert, err := readCert(p.cert(spec.name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cert.CheckSignatureFrom(caCert)).To(Succeed(), spec.name)
		if spec.server {
			g.Expect(cert.VerifyHostname("127.0.0.1")).To(Succeed(), spec.name)
			g.Expect(cert.ExtKeyUsage).To(ContainElement(x509.ExtKeyUsageServerAuth))
		}
	}
	adminCert, _ := readCert(p.cert("admin"))
	g.Expect(adminCert.Subject.Organization).To(ConsistOf("system:masters"))
	fi, err := os.Stat(p.key("ca"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)), "private keys are readable by the owner only")
}

// TestServingCertsNameHostAddresses: the certificates of the servers
// machines reach name the addresses hosts reach the hub at, and are issued
// again when one is added; the others keep loopback only.
func TestServingCertsNameHostAddresses(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p, err := ensurePKI(dir)
	g.Expect(err).NotTo(HaveOccurred())
	deploy, err := readCert(p.cert(DeployServerCert))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deploy.VerifyHostname("10.0.2.2")).NotTo(Succeed())

	p, err = ensurePKI(dir, "10.0.2.2", "hub.lab.example")
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{DeployServerCert, AgentServiceCert, IgnitionServerCert} {
		cert, err := readCert(p.cert(name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cert.VerifyHostname("10.0.2.2")).To(Succeed(), name)
		g.Expect(cert.VerifyHostname("hub.lab.example")).To(Succeed(), name)
		g.Expect(cert.VerifyHostname("127.0.0.1")).To(Succeed(), name)
	}
	webhook, err := readCert(p.cert("webhook"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(webhook.VerifyHostname("10.0.2.2")).NotTo(Succeed())

	again, err := os.ReadFile(p.cert(DeployServerCert))
	g.Expect(err).NotTo(HaveOccurred())
	p, err = ensurePKI(dir, "10.0.2.2", "hub.lab.example")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.ReadFile(p.cert(DeployServerCert))).To(Equal(again), "kept while it names every address")
}

func TestChoosePorts(t *testing.T) {
	g := NewWithT(t)
	first, err := choosePorts(Ports{})
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[int]bool{}
	for _, p := range []int{first.EtcdClient, first.EtcdPeer, first.APIServer, first.Webhook, first.ControllerManager, first.Deploy, first.Ignition, first.AgentService, first.DeployBoot} {
		g.Expect(p).To(BeNumerically(">", 0))
		g.Expect(seen[p]).To(BeFalse(), "port %d handed out twice", p)
		seen[p] = true
	}
	again, err := choosePorts(first)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(first), "free ports are kept")
}
