package agentclusterinstall

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// newRequest is a PEM certificate request of tmpl, with a new key.
func newRequest(t *testing.T, tmpl *x509.CertificateRequest) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// TestCSRHost: which joining host a kubelet CSR is for, and why it must
// not be approved.
func TestCSRHost(t *testing.T) {
	host := &agentinstallv1.Agent{}
	host.Name = "c1000000-0000-4000-8000-000000000001"
	host.Spec.Hostname = "worker-7"
	host.Status.Inventory.Hostname = "master-0"
	host.Status.Inventory.Interfaces = []agentinstallv1.HostInterface{{IPV4Addresses: []string{"192.168.111.27/24"}, IPV6Addresses: []string{"fd00::27/64"}}}
	hosts := map[string]*agentinstallv1.Agent{"worker-7": host}

	request := func(cn string, orgs []string, dns []string, ips ...string) []byte {
		tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}, DNSNames: dns}
		for _, ip := range ips {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
		}
		return newRequest(t, tmpl)
	}
	nodes := []string{"system:nodes"}
	clientUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	servingUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	csr := func(signer, user string, groups []string, usages []certificatesv1.KeyUsage, req []byte) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: signer, Username: user, Groups: groups, Usages: usages, Request: req}}
	}
	const client, serving = certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.KubeletServingSignerName
	bootstrapper := []string{"system:serviceaccounts", "system:authenticated"}

	for _, tc := range []struct {
		name    string
		csr     *certificatesv1.CertificateSigningRequest
		host    bool
		typ     agentinstallv1.CSRType
		refusal string
	}{
		{"client, the node bootstrapper", csr(client, NodeBootstrapperUser, bootstrapper, clientUsages, request("system:node:worker-7", nodes, nil)),
			true, agentinstallv1.CSRTypeClient, ""},
		{"client, a bootstrap token", csr(client, "system:bootstrap:abcdef", []string{"system:bootstrappers", "system:authenticated"}, clientUsages,
			request("system:node:worker-7", nodes, nil)), true, agentinstallv1.CSRTypeClient, ""},
		{"client, the hostname the agent reports", csr(client, NodeBootstrapperUser, bootstrapper, clientUsages, request("system:node:master-0", nodes, nil)),
			false, "", ""},
		{"client, no joining host's", csr(client, NodeBootstrapperUser, bootstrapper, clientUsages, request("system:node:worker-9", nodes, nil)), false, "", ""},
		{"client, a user not the bootstrapper", csr(client, "system:serviceaccount:default:x", bootstrapper, clientUsages,
			request("system:node:worker-7", nodes, nil)), true, agentinstallv1.CSRTypeClient,
			`it was asked for by "system:serviceaccount:default:x", not by the node bootstrapper`},
		{"client, a bootstrap user outside the group", csr(client, "system:bootstrap:abcdef", []string{"system:authenticated"}, clientUsages,
			request("system:node:worker-7", nodes, nil)), true, agentinstallv1.CSRTypeClient,
			`it was asked for by "system:bootstrap:abcdef", not by the node bootstrapper`},
		{"client, the node itself", csr(client, "system:node:worker-7", nodes, clientUsages, request("system:node:worker-7", nodes, nil)),
			true, agentinstallv1.CSRTypeClient, `it was asked for by "system:node:worker-7", not by the node bootstrapper`},
		{"client, server usage", csr(client, NodeBootstrapperUser, bootstrapper, servingUsages, request("system:node:worker-7", nodes, nil)),
			true, agentinstallv1.CSRTypeClient, "its usages [digital signature key encipherment server auth] are not a kubelet client's"},
		{"client, masters", csr(client, NodeBootstrapperUser, bootstrapper, clientUsages, request("system:node:worker-7", []string{"system:masters"}, nil)),
			true, agentinstallv1.CSRTypeClient, `its organization is ["system:masters"], not [system:nodes]`},
		{"client, names hosts", csr(client, NodeBootstrapperUser, bootstrapper, clientUsages, request("system:node:worker-7", nodes, []string{"worker-7"})),
			true, agentinstallv1.CSRTypeClient, "a client certificate request names hosts"},
		{"serving, the node", csr(serving, "system:node:worker-7", nodes, servingUsages,
			request("system:node:worker-7", nodes, []string{"worker-7", "worker-7.example.com"}, "192.168.111.27", "fd00::27")),
			true, agentinstallv1.CSRTypeServing, ""},
		{"serving, another node", csr(serving, "system:node:worker-8", nodes, servingUsages, request("system:node:worker-7", nodes, []string{"worker-7"})),
			true, agentinstallv1.CSRTypeServing, `it was asked for by "system:node:worker-8", not by node worker-7`},
		{"serving, not in system:nodes", csr(serving, "system:node:worker-7", []string{"system:authenticated"}, servingUsages,
			request("system:node:worker-7", nodes, []string{"worker-7"})), true, agentinstallv1.CSRTypeServing,
			`it was asked for by "system:node:worker-7", not by node worker-7`},
		{"serving, a foreign name", csr(serving, "system:node:worker-7", nodes, servingUsages, request("system:node:worker-7", nodes, []string{"api.example.com"})),
			true, agentinstallv1.CSRTypeServing, `it names "api.example.com", not the node's name`},
		{"serving, a name with the node's as prefix", csr(serving, "system:node:worker-7", nodes, servingUsages,
			request("system:node:worker-7", nodes, []string{"worker-70"})), true, agentinstallv1.CSRTypeServing, `it names "worker-70", not the node's name`},
		{"serving, a foreign address", csr(serving, "system:node:worker-7", nodes, servingUsages,
			request("system:node:worker-7", nodes, []string{"worker-7"}, "10.0.0.1")), true, agentinstallv1.CSRTypeServing,
			"it names address 10.0.0.1, which the host does not have"},
		{"serving, client usage", csr(serving, "system:node:worker-7", nodes, clientUsages, request("system:node:worker-7", nodes, []string{"worker-7"})),
			true, agentinstallv1.CSRTypeServing, "its usages [digital signature key encipherment client auth] are not a kubelet server's"},
		{"another signer", csr("kubernetes.io/kube-apiserver-client", NodeBootstrapperUser, bootstrapper, clientUsages,
			request("system:node:worker-7", nodes, nil)), false, "", ""},
		{"not a request", csr(client, NodeBootstrapperUser, bootstrapper, clientUsages, []byte("garbage")), false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a, typ, refusal := csrHost(tc.csr, hosts)
			if !tc.host {
				g.Expect(a).To(BeNil())
				return
			}
			g.Expect(a).To(BeIdenticalTo(host))
			g.Expect(typ).To(Equal(tc.typ))
			g.Expect(refusal).To(Equal(tc.refusal))
		})
	}
}
