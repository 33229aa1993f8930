package rfc2136

import (
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/infrastructure/equinix/rfc2136/bindtest"
)

// The tests update a real BIND (Debian's bind9, which hack/deps.sh
// installs), run by each test in its own directory on a reserved loopback
// port, and read the records back through Go's own resolver asking it.

const (
	testZone    = bindtest.Zone
	testKeyName = bindtest.KeyName
)

// bind is a running named serving testZone, which takes updates signed
// with key.
type bind struct {
	*bindtest.BIND
	addr string
	key  Key
}

func startBind(t *testing.T) *bind {
	b := bindtest.Start(t)
	return &bind{BIND: b, addr: b.Addr, key: Key{Name: b.KeyName, Algorithm: b.Algorithm, Secret: b.Secret}}
}

// server is a Server updating b's zone with b's key.
func (b *bind) server() Server {
	key := b.key
	return Server{Address: b.addr, Zone: testZone, Key: &key, Timeout: 10 * time.Second}
}

func (b *bind) expectAddrs(t *testing.T, host string, addrs ...string) {
	b.ExpectAddrs(t, host, addrs...)
}
func (b *bind) expectNotFound(t *testing.T, host string) { b.ExpectNotFound(t, host) }

// expectNoSecret expects none of the secrets in err's text.
func expectNoSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		NewWithT(t).Expect(err.Error()).NotTo(ContainSubstring(s), "the error shows a TSIG secret")
	}
}

// otherSecret is a valid TSIG secret that is not b's.
func otherSecret() string {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	return base64.StdEncoding.EncodeToString(secret)
}
