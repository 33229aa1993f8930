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

func TestChoosePorts(t *testing.T) {
	g := NewWithT(t)
	first, err := choosePorts(Ports{})
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[int]bool{}
	for _, p := range []int{first.EtcdClient, first.EtcdPeer, first.APIServer, first.Webhook, first.ControllerManager, first.Deploy, first.Ignition, first.AgentService} {
		g.Expect(p).To(BeNumerically(">", 0))
		g.Expect(seen[p]).To(BeFalse(), "port %d handed out twice", p)
		seen[p] = true
	}
	again, err := choosePorts(first)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(first), "free ports are kept")
}
