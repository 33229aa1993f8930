package metal3

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// CAKey is the key of DeployTLSSecret's data that holds the CA hosts are
// handed, as in a cert-manager Secret.
const CAKey = "ca.crt"

// ControlPlaneLabel selects the nodes the operand runs on (its
// nodeSelector), whose addresses the deploy server's certificate holds.
const ControlPlaneLabel = "node-role.kubernetes.io/master"

// ServingIPs are the addresses hosts may be told to reach the deploy
// server at, which its certificate holds: provisioningIP when it is set,
// and every address of the control-plane nodes (the operand runs on one of
// them, and DeployURL is that node's address when no provisioningIP is
// used). Sorted, without duplicates.
func ServingIPs(spec *metal3v1.ProvisioningSpec, nodes []corev1.Node) []net.IP {
	var ips []net.IP
	add := func(s string) {
		ip := net.ParseIP(s)
		if ip == nil || slices.ContainsFunc(ips, ip.Equal) {
			return
		}
		ips = append(ips, ip)
	}
	add(spec.ProvisioningIP)
	for _, n := range nodes {
		if _, ok := n.Labels[ControlPlaneLabel]; !ok {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				add(a.Address)
			}
		}
	}
	slices.SortFunc(ips, func(a, b net.IP) int { return compareIP(a.To16(), b.To16()) })
	return ips
}

func compareIP(a, b net.IP) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// Lifetimes of the deploy server's CA and certificate; both start an hour
// before they are made, for clocks that lag.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	CertLifetime = 365 * 24 * time.Hour
)

// NewDeployCA returns the data of DeployCASecret: a new CA, valid from now
// for CALifetime.
func NewDeployCA(now time.Time) (map[string][]byte, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "metalshift deploy server CA", OrganizationalUnit: []string{"metalshift"}},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	cert, key, err := sign(tmpl, nil, nil, now, CALifetime)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}, nil
}

// IssueDeployTLS returns the data of DeployTLSSecret: a serving
// certificate for ips, valid from now for CertLifetime, signed by the CA
// of caData (DeployCASecret's), and that CA's certificate as the one hosts
// trust.
func IssueDeployTLS(caData map[string][]byte, ips []net.IP, now time.Time) (map[string][]byte, error) {
	ca, err := tls.X509KeyPair(caData[corev1.TLSCertKey], caData[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("the CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("the CA: %w", err)
	}
	caKey, ok := ca.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA's key cannot sign")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "metal3 deploy server"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips,
	}
	cert, key, err := sign(tmpl, caCert, caKey, now, CertLifetime)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key, CAKey: caData[corev1.TLSCertKey]}, nil
}

// sign makes a new key (ECDSA P-256) and the certificate of tmpl for it,
// valid from an hour before now for lifetime, signed by parent and its
// key (self-signed when parent is nil); both PEM.
func sign(tmpl, parent *x509.Certificate, parentKey crypto.Signer, now time.Time, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(lifetime)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// DeployTLSRenewal tells whether data (DeployTLSSecret's) still serves at
// now: a certificate and its key, signed by the CA of caData for exactly
// ips, with that CA as the one hosts trust, and not past its renewal time
// (two thirds of its lifetime), which it returns. Anything else is issued
// again.
func DeployTLSRenewal(data, caData map[string][]byte, ips []net.IP, now time.Time) (time.Time, bool) {
	cert, err := servingCert(data, caData, now)
	if err != nil {
		return time.Time{}, false
	}
	have := slices.Clone(cert.IPAddresses)
	slices.SortFunc(have, func(a, b net.IP) int { return compareIP(a.To16(), b.To16()) })
	if !slices.EqualFunc(have, ips, net.IP.Equal) {
		return time.Time{}, false
	}
	renewAt := cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) * 2 / 3)
	return renewAt, now.Before(renewAt)
}

// servingCert is the certificate of data when it and its key pair up and
// the CA of caData signed it for serving, with that CA as data's CA.
func servingCert(data, caData map[string][]byte, now time.Time) (*x509.Certificate, error) {
	if string(data[CAKey]) != string(caData[corev1.TLSCertKey]) {
		return nil, errors.New("another CA")
	}
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(caData[corev1.TLSCertKey])
	if block == nil {
		return nil, errors.New("the CA is not PEM")
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, err
	}
	return cert, nil
}
