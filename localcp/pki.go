package localcp

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore is how long before expiry a leaf certificate is reissued on start.
	renewBefore = 30 * 24 * time.Hour
)

// certSpec describes one leaf certificate issued by the hub CA.
type certSpec struct {
	name   string // file stem under pki/
	cn     string
	orgs   []string
	server bool
	client bool
	// machines marks the servers machines reach: their certificates also
	// name the addresses hosts reach the hub at (Options.HostAddresses).
	machines bool
}

var (
	loopbackIPs   = []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP(KubernetesServiceIP)}
	loopbackNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}

	leafCerts = []certSpec{
		{name: "etcd-server", cn: "etcd", server: true, client: true},
		{name: "apiserver-etcd-client", cn: "kube-apiserver-etcd-client", client: true},
		{name: "apiserver", cn: "kube-apiserver", server: true},
		{name: "admin", cn: "metalshift-admin", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "controller-manager-serving", cn: "kube-controller-manager", server: true},
		{name: "webhook", cn: "metalshift-webhook", server: true},
		{name: IgnitionServerCert, cn: "metalshift-ignition-server", server: true, machines: true},
		{name: DeployServerCert, cn: "metalshift-deploy-server", server: true, machines: true},
		{name: AgentServiceCert, cn: "metalshift-agent-service", server: true, machines: true},
		{name: ConsoleCert, cn: "metalshift-console", server: true},
	}
)

// The certificates of the servers machines reach (Hub.ServingCert).
const (
	IgnitionServerCert = "ignition-server"
	DeployServerCert   = "deploy-server"
	AgentServiceCert   = "agent-service"
	// ConsoleCert is the web console's, for loopback only: people reach
	// it from the hub's machine.
	ConsoleCert = "console"
)

// pki holds the paths of the hub's key material under <dir>/pki.
type pki struct {
	dir string
}

func (p pki) cert(name string) string { return filepath.Join(p.dir, name+".crt") }
func (p pki) key(name string) string  { return filepath.Join(p.dir, name+".key") }

// ensurePKI creates the CA, the service-account key and every leaf
// certificate that is missing or close to expiry, or (for the servers
// machines reach) does not name every one of hostAddrs. Existing material
// is kept, so kubeconfigs written by earlier runs stay valid.
func ensurePKI(dir string, hostAddrs ...string) (pki, error) {
	p := pki{dir: filepath.Join(dir, "pki")}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return p, err
	}
	caCert, caKey, err := p.ensureCA()
	if err != nil {
		return p, err
	}
	if _, err := ensureKey(p.key("sa")); err != nil {
		return p, err
	}
	if err := writePublicKey(p.key("sa"), filepath.Join(p.dir, "sa.pub")); err != nil {
		return p, err
	}
	for _, spec := range leafCerts {
		if err := p.ensureLeaf(spec, caCert, caKey, hostAddrs); err != nil {
			return p, fmt.Errorf("certificate %s: %w", spec.name, err)
		}
	}
	return p, nil
}

func (p pki) ensureCA() (*x509.Certificate, crypto.Signer, error) {
	if cert, err := readCert(p.cert("ca")); err == nil {
		key, err := readKey(p.key("ca"))
		if err != nil {
			return nil, nil, err
		}
		return cert, key, nil
	}
	key, err := ensureKey(p.key("ca"))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "metalshift-hub-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(p.cert("ca"), "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func (p pki) ensureLeaf(spec certSpec, ca *x509.Certificate, caKey crypto.Signer, hostAddrs []string) error {
	ips, names := slices.Clone(loopbackIPs), slices.Clone(loopbackNames)
	if spec.machines {
		for _, a := range hostAddrs {
			if ip := net.ParseIP(a); ip != nil {
				ips = append(ips, ip)
			} else if a != "" {
				names = append(names, a)
			}
		}
	}
	if cert, err := readCert(p.cert(spec.name)); err == nil && time.Until(cert.NotAfter) > renewBefore && cert.CheckSignatureFrom(ca) == nil &&
		(!spec.server || namesAll(cert, ips, names)) {
		return nil
	}
	key, err := ensureKey(p.key(spec.name))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = ips
		tmpl.DNSNames = names
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	return writePEM(p.cert(spec.name), "CERTIFICATE", der, 0o644)
}

// namesAll tells whether cert is valid for every one of ips and names.
func namesAll(cert *x509.Certificate, ips []net.IP, names []string) bool {
	for _, ip := range ips {
		if cert.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	for _, n := range names {
		if cert.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

// ensureKey returns the ECDSA P-256 key at path, creating it when missing.
func ensureKey(path string) (crypto.Signer, error) {
	if key, err := readKey(path); err == nil {
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return key, writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePublicKey(keyPath, pubPath string) error {
	key, err := readKey(keyPath)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	return writePEM(pubPath, "PUBLIC KEY", der, 0o644)
}

func readCert(path string) (*x509.Certificate, error) {
	block, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(block.Bytes)
}

func readKey(path string) (crypto.Signer, error) {
	block, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", path)
	}
	return signer, nil
}

func readPEM(path string) (*pem.Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM data", path)
	}
	return block, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}
