package deployapi

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"time"
)

// Where the deploy server serves a metal cloud's devices what their
// custom iPXE boots: the script, the live kernel and initramfs, and the
// device's initrd holding its boot configuration (a MetalCloud section).
// Each is asked for with the same signed query (SignMetalCloudQuery).
const (
	MetalCloudScriptPath = "/metalcloud/boot.ipxe"
	MetalCloudKernelPath = "/metalcloud/kernel"
	MetalCloudInitrdPath = "/metalcloud/initrd"
	MetalCloudHostPath   = "/metalcloud/host.img"
)

// MetalCloudBoot is what one machine of a metal cloud boots: the
// installer of the live image, with what it reads and writes.
type MetalCloudBoot struct {
	// Machine names the machine it is for (namespace/name/UID of its
	// infrastructure machine): the signature is scoped to it.
	Machine string `json:"machine"`
	MetalCloud
}

// SignMetalCloudQuery returns the query that makes the metal cloud boot
// URLs valid for b until expiry. The query carries b itself (the deploy
// server reads nothing else to serve it), signed with the hub's key, so
// that a device boots exactly what the provider asked for; it holds no
// secret (the machine's credentials are in its user data, which the
// cloud's metadata service serves to that machine alone).
func SignMetalCloudQuery(key []byte, b MetalCloudBoot, expiry time.Time) (string, error) {
	data, err := json.Marshal(b)
	if err != nil {
		return "", err
	}
	boot, exp := base64.RawURLEncoding.EncodeToString(data), formatExpiry(expiry)
	return "boot=" + boot + "&expires=" + exp + "&signature=" + sign(key, "metalcloud", boot, exp), nil
}

// VerifyMetalCloudQuery checks a metal cloud boot URL's query at time now
// and returns what it boots and until when.
func VerifyMetalCloudQuery(key []byte, q url.Values, now time.Time) (MetalCloudBoot, time.Time, error) {
	boot, expires, sig := q.Get("boot"), q.Get("expires"), q.Get("signature")
	exp, ok := parseExpiry(expires)
	if !ok || expired(now, exp) || boot == "" {
		return MetalCloudBoot{}, time.Time{}, ErrBadToken
	}
	if !hmac.Equal([]byte(sig), []byte(sign(key, "metalcloud", boot, expires))) {
		return MetalCloudBoot{}, time.Time{}, ErrBadToken
	}
	data, err := base64.RawURLEncoding.DecodeString(boot)
	if err != nil {
		return MetalCloudBoot{}, time.Time{}, ErrBadToken
	}
	var b MetalCloudBoot
	if err := json.Unmarshal(data, &b); err != nil || b.Machine == "" || b.MetadataURL == "" || b.Image.URL == "" {
		return MetalCloudBoot{}, time.Time{}, ErrBadToken
	}
	return b, exp, nil
}
