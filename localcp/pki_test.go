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

// TestReservePorts: a hub's ports are distinct, another hub starting
// meanwhile gets none of them, and they are kept for the next start once
// released.
func TestReservePorts(t *testing.T) {
	g := NewWithT(t)
	list := func(p Ports) []int {
		return []int{p.EtcdClient, p.EtcdPeer, p.APIServer, p.Webhook, p.ControllerManager, p.Deploy, p.Ignition, p.AgentService, p.DeployBoot}
	}
	first, release, err := reservePorts(Ports{})
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[int]bool{}
	for _, p := range list(first) {
		g.Expect(p).To(BeNumerically(">", 0))
		g.Expect(seen[p]).To(BeFalse(), "port %d handed out twice", p)
		seen[p] = true
	}
	other, releaseOther, err := reservePorts(first)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range list(other) {
		g.Expect(seen[p]).To(BeFalse(), "port %d of a running hub handed to another", p)
	}
	releaseOther()
	release()
	again, release, err := reservePorts(first)
	g.Expect(err).NotTo(HaveOccurred())
	defer release()
	g.Expect(again).To(Equal(first), "free ports are kept")
}
