package assistedapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// HostKeyHeader carries a host's credential (metalshift's addition to the
// agent API, which upstream's agent neither reads nor sends). The answer
// to the registration of a new host carries it; every later call of that
// host's agent sends it: instructions, step replies, progress,
// logs-progress, downloads/files and logs. The InfraEnv's X-Secret-Key
// only registers hosts.
const HostKeyHeader = "X-Metalshift-Host-Key"

// ErrBadHostKey is returned by ParseHostKey.
var ErrBadHostKey = errors.New("invalid host credential")

// hostKeyPrefix starts every host credential, so that one is never taken
// for an InfraEnv key and the format can change.
const hostKeyPrefix = "mhk1"

// NewHostKey mints a credential for host hostID of InfraEnv infraEnvID:
// "mhk1.<infra env id>.<host id>.<32 random bytes>.<HMAC of the rest with
// the hub's key>". The signature lets the service refuse a forged
// credential before it reads anything; the random part makes every
// registration's credential a new one, recorded (HostKeyHash) on the
// host's Agent, which ends it by forgetting the hash.
func NewHostKey(key []byte, infraEnvID, hostID string) (string, error) {
	nonce := make([]byte, 32)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	body := strings.Join([]string{hostKeyPrefix, infraEnvID, hostID, base64.RawURLEncoding.EncodeToString(nonce)}, ".")
	return body + "." + hostKeyMAC(key, body), nil
}

// ParseHostKey checks a credential's signature and returns the InfraEnv
// and host it was minted for. It reads nothing: whether the credential is
// still the host's is the Agent's to say (HostKeyHash).
func ParseHostKey(key []byte, cred string) (infraEnvID, hostID string, err error) {
	body, mac, ok := cutLast(cred, ".")
	if !ok || len(cred) > 256 {
		return "", "", ErrBadHostKey
	}
	parts := strings.Split(body, ".")
	if len(parts) != 4 || parts[0] != hostKeyPrefix || parts[1] == "" || parts[2] == "" || parts[3] == "" {
		return "", "", ErrBadHostKey
	}
	if !hmac.Equal([]byte(mac), []byte(hostKeyMAC(key, body))) {
		return "", "", ErrBadHostKey
	}
	return parts[1], parts[2], nil
}

// HostKeyHash is what the service records of a credential: its SHA-256,
// hex.
func HostKeyHash(cred string) string {
	sum := sha256.Sum256([]byte(cred))
	return hex.EncodeToString(sum[:])
}

func hostKeyMAC(key []byte, body string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("agent-install/host\x00" + body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
