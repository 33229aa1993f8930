package metal3

import (
	"crypto/tls"
	"crypto/x509"
	"maps"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

func node(name string, controlPlane bool, addrs ...corev1.NodeAddress) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Status: corev1.NodeStatus{Addresses: addrs}}
	if controlPlane {
		n.Labels[ControlPlaneLabel] = ""
	}
	return n
}

// TestServingIPs: the certificate holds provisioningIP and the control
// plane's node addresses (where $(HOST_IP) may lead), not the workers',
// not host names.
func TestServingIPs(t *testing.T) {
	g := NewWithT(t)
	nodes := []corev1.Node{
		node("master-1", true, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.111.21"},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "master-1"}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd2e:6f44:5dd8::21"}),
		node("master-0", true, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.111.20"},
			corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "10.0.0.20"}),
		node("worker-0", false, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.111.30"}),
	}
	strs := func(ips []net.IP) []string {
		var out []string
		for _, ip := range ips {
			out = append(out, ip.String())
		}
		return out
	}
	g.Expect(strs(ServingIPs(&metal3v1.ProvisioningSpec{ProvisioningIP: "172.22.0.3"}, nodes))).To(Equal(
		[]string{"10.0.0.20", "172.22.0.3", "192.168.111.20", "192.168.111.21", "fd2e:6f44:5dd8::21"}), "sorted, the same for the same nodes")
	g.Expect(strs(ServingIPs(&metal3v1.ProvisioningSpec{ProvisioningNetwork: metal3v1.ProvisioningNetworkDisabled}, nodes[2:]))).To(BeEmpty())
	g.Expect(strs(ServingIPs(&metal3v1.ProvisioningSpec{ProvisioningIP: "192.168.111.20"}, nodes[1:2]))).To(Equal([]string{"10.0.0.20", "192.168.111.20"}), "no duplicate")
}

// TestDeployTLS: a certificate the operator issued serves hosts that
// trust the CA, for exactly its addresses, until two thirds of its
// lifetime; anything else — other addresses, another CA (also one that
// copied our CA's certificate into ca.crt), a key of another certificate,
// a time outside its validity, garbage — is issued again.
func TestDeployTLS(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	ips := []net.IP{net.ParseIP("172.22.0.3"), net.ParseIP("192.168.111.20")}
	g := NewWithT(t)
	ca, err := NewDeployCA(now)
	g.Expect(err).NotTo(HaveOccurred())
	data, err := IssueDeployTLS(ca, ips, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data[CAKey]).To(Equal(ca[corev1.TLSCertKey]))

	// What a host does with the CA of its boot configuration.
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(data[CAKey])).To(BeTrue())
	for _, host := range []string{"172.22.0.3", "192.168.111.20"} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now.Add(time.Hour)})
		g.Expect(err).NotTo(HaveOccurred(), host)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "192.168.111.21", CurrentTime: now})
	g.Expect(err).To(HaveOccurred(), "another address")

	other, err := NewDeployCA(now)
	g.Expect(err).NotTo(HaveOccurred())
	forged, err := IssueDeployTLS(other, ips, now)
	g.Expect(err).NotTo(HaveOccurred())
	forged[CAKey] = ca[corev1.TLSCertKey]
	fresh, err := IssueDeployTLS(ca, ips, now)
	g.Expect(err).NotTo(HaveOccurred())
	with := func(k string, v []byte) map[string][]byte {
		d := maps.Clone(data)
		d[k] = v
		return d
	}
	renewAt := now.Add(-time.Hour).Add((CertLifetime + time.Hour) * 2 / 3)
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		ips     []net.IP
		at      time.Time
		current bool
	}{
		{"as issued", data, ips, now, true},
		{"just before renewal", data, ips, renewAt.Add(-time.Minute), true},
		{"due for renewal", data, ips, renewAt, false},
		{"expired", data, ips, now.Add(CertLifetime + time.Hour), false},
		{"not yet valid (a clock set back)", data, ips, now.Add(-2 * time.Hour), false},
		{"an address more", data, append([]net.IP{net.ParseIP("10.0.0.20")}, ips...), now, false},
		{"an address less", data, ips[:1], now, false},
		{"another CA", forged, ips, now, false},
		{"another CA's certificate as ca.crt", with(CAKey, other[corev1.TLSCertKey]), ips, now, false},
		{"the key of another certificate", with(corev1.TLSPrivateKeyKey, fresh[corev1.TLSPrivateKeyKey]), ips, now, false},
		{"no certificate", map[string][]byte{}, ips, now, false},
		{"garbage", with(corev1.TLSCertKey, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")), ips, now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			at, current := DeployTLSRenewal(tc.data, ca, tc.ips, tc.at)
			g.Expect(current).To(Equal(tc.current))
			if tc.current {
				g.Expect(at).To(BeTemporally("~", renewAt, time.Second))
			}
		})
	}
	_, err = IssueDeployTLS(map[string][]byte{corev1.TLSCertKey: ca[corev1.TLSCertKey]}, ips, now)
	g.Expect(err).To(MatchError(ContainSubstring("the CA")), "a CA without its key signs nothing")
}
