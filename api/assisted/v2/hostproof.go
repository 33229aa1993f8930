package assistedapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// HostProofHeader carries, on a registration, the proof that the host
// engine started this discovery agent for a BareMetalHost (metalshift's;
// the converged flow): the deploy server hands it to the deploy agent of
// that host with its custom deploy start_assisted_install, which starts
// the discovery agent with it. BMAC approves, in the converged flow, only
// an Agent registered with its host's proof: a MAC is what any machine
// with a copy of the image can claim, the proof is what only the machine
// the engine serves as that host gets.
const HostProofHeader = "X-Metalshift-Host-Proof"

// HostProofLifetime is how long a proof registers hosts after the deploy
// server handed it out: the discovery agent registers at once.
const HostProofLifetime = 2 * time.Hour

// ErrBadHostProof is returned by ParseHostProof.
var ErrBadHostProof = errors.New("invalid or expired host proof")

// HostProof is what a proof says: the BareMetalHost (namespace, name and
// UID) the engine started the agent for, and until when it registers.
type HostProof struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       string    `json:"uid"`
	Expires   time.Time `json:"expires"`
}

// hostProofPrefix starts every proof.
const hostProofPrefix = "mhp1."

// SignHostProof returns p signed with the hub's key:
// "mhp1.<base64url JSON>.<HMAC>".
func SignHostProof(key []byte, p HostProof) string {
	data, _ := json.Marshal(p) // strings and a time: cannot fail
	body := hostProofPrefix + base64.RawURLEncoding.EncodeToString(data)
	return body + "." + hostProofMAC(key, body)
}

// ParseHostProof checks a proof's signature and expiry at now and returns
// what it says.
func ParseHostProof(key []byte, proof string, now time.Time) (HostProof, error) {
	var p HostProof
	body, mac, ok := cutLast(proof, ".")
	if !ok || len(proof) > 2048 || !strings.HasPrefix(body, hostProofPrefix) ||
		!hmac.Equal([]byte(mac), []byte(hostProofMAC(key, body))) {
		return p, ErrBadHostProof
	}
	data, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(body, hostProofPrefix))
	if err != nil || json.Unmarshal(data, &p) != nil || p.Namespace == "" || p.Name == "" || p.UID == "" || !now.Before(p.Expires) {
		return HostProof{}, ErrBadHostProof
	}
	return p, nil
}

// Host is what an Agent registered with the proof records:
// "<name>/<uid>" of the BareMetalHost.
func (p HostProof) Host() string { return p.Name + "/" + p.UID }

func hostProofMAC(key []byte, body string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("agent-install/host-proof\x00" + body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
