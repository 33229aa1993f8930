package deployapi

import (
	"crypto/hmac"
	"strings"
	"time"
)

// The converged flow of the agent-based install: one image for many hosts.
//
// An image that is not made for one host (an InfraEnv's discovery ISO that
// a host's PreprovisioningImage serves) carries no host ID and no deploy
// token. Its boot configuration has a Lookup section instead: the agent
// presents the section's credential and the machine's MAC addresses at
// LookupPath, as ironic-python-agent looks its node up, and gets the boot
// configuration a per-host image would have carried.
const (
	// LookupPath is the deploy server's lookup endpoint (POST).
	LookupPath = "/deploy/v1/lookup"
	// ActionCustomDeploy runs a custom deploy method the image provides
	// (the BareMetalHost's spec.customDeploy.method) instead of writing an
	// image.
	ActionCustomDeploy = "custom-deploy"
	// MethodStartAssistedInstall is the custom deploy method of the
	// agent-based install's images: it starts the discovery agent, which
	// installs the host and does not reboot it; the engine then boots the
	// disk.
	MethodStartAssistedInstall = "start_assisted_install"
)

// Lookup is the lookup section of a boot configuration.
type Lookup struct {
	// EngineURL is the deploy server's base URL.
	EngineURL string `json:"engineURL"`
	// Scope names the image the credential belongs to: the path of its
	// URL (without the query, which changes as URLs are renewed). The
	// deploy server answers only for a host whose PreprovisioningImage
	// serves an image at that path.
	Scope string `json:"scope"`
	// Token is SignLookupToken(key, Scope, expiry), with the key the hub's
	// host engine and agent service share and the expiry of the image's
	// URL: it expires with the image. It allows the lookup only.
	Token string `json:"token"`
}

// LookupRequest is what the agent posts to LookupPath.
type LookupRequest struct {
	Scope string `json:"scope"`
	Token string `json:"token"`
	// MACs are the machine's NICs' MAC addresses.
	MACs []string `json:"macs"`
}

// The answer to a LookupRequest is a BootConfig (200): the host's engine
// URL, host ID, the ticket of its current request and its network data.
// It is given only while the engine has booted the host for that request
// and the request's token was not handed out. 404 means no host with one
// of the MACs boots the image now (the image was booted by hand, the
// host's PreprovisioningImage serves another image, or the engine did not
// boot it); 401 a bad or expired credential; 409 more than one host, or a
// request whose token was handed out already.

// SignLookupToken returns the lookup credential of an image at scope
// whose URL expires at expiry: "<expiry as Unix seconds>.<signature>".
func SignLookupToken(key []byte, scope string, expiry time.Time) string {
	exp := formatExpiry(expiry)
	return exp + "." + sign(key, "lookup", scope, exp)
}

// VerifyLookupToken checks a lookup credential for scope at time now.
func VerifyLookupToken(key []byte, scope, token string, now time.Time) error {
	e, _, ok := strings.Cut(token, ".")
	exp, valid := parseExpiry(e)
	if scope == "" || !ok || !valid || expired(now, exp) {
		return ErrBadToken
	}
	if !hmac.Equal([]byte(token), []byte(SignLookupToken(key, scope, exp))) {
		return ErrBadToken
	}
	return nil
}
