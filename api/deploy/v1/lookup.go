package deployapi

import (
	"crypto/hmac"
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
	// Token is SignLookupToken(key, Scope), with the key the hub's host
	// engine and agent service share. It allows the lookup only.
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
// URL, host ID, deploy token and network data. 404 means no host with one
// of the MACs boots the image now (the image was booted by hand, or the
// host's PreprovisioningImage serves another image); 401 a bad credential;
// 409 more than one host.

// SignLookupToken returns the lookup credential of an image at scope. It
// does not expire: it is part of the image, whose URLs expire.
func SignLookupToken(key []byte, scope string) string {
	return mac(key, "lookup", scope)
}

// VerifyLookupToken checks a lookup credential.
func VerifyLookupToken(key []byte, scope, token string) error {
	if scope == "" || !hmac.Equal([]byte(token), []byte(SignLookupToken(key, scope))) {
		return ErrBadToken
	}
	return nil
}
