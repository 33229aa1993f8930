package ignition

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"k8s.io/utils/ptr"
)

// Version is the Ignition spec version rendered.
const Version = "3.4.0"

// PointerOptions describe a pointer config.
type PointerOptions struct {
	// MachineConfigServer is the base URL of the machine-config-server,
	// e.g. https://api-int.demo.example.com:22623.
	MachineConfigServer string
	// Role is master or worker: the config merged is <server>/config/<role>.
	Role string
	// RootCA is the PEM of the CA that signs the server's certificate.
	RootCA []byte
	// Override is an Ignition config (any 3.x version) merged after the
	// machine-config-server's; empty means none.
	Override []byte
}

// ErrInvalidOverride wraps a problem with a user's override.
var ErrInvalidOverride = errors.New("invalid ignition override")

// ErrInstallConfigHasSecrets means the install-config copy for a bootstrap node
// holds a pull secret or BMC credentials, or cannot be read to tell.
var ErrInstallConfigHasSecrets = errors.New("the install-config copy for the bootstrap node must hold no pull secret and no BMC credentials (installconfig.Sanitize)")

// Pointer renders the config a master or worker boots with: it merges the
// machine-config-server's config for the role, trusting RootCA, then the
// override.
func Pointer(o PointerOptions) ([]byte, error) {
	if o.Role != "master" && o.Role != "worker" {
		return nil, fmt.Errorf("pointer configs are for master and worker, not %q", o.Role)
	}
	if len(o.RootCA) == 0 {
		return nil, errors.New("the root CA is empty")
	}
	u, err := url.Parse(o.MachineConfigServer)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("machine-config-server URL %q: want https://host:port", o.MachineConfigServer)
	}
	cfg := types.Config{Ignition: types.Ignition{Version: Version}}
	cfg.Ignition.Config.Merge = []types.Resource{{Source: ptr.To(u.JoinPath("config", o.Role).String())}}
	cfg.Ignition.Security.TLS.CertificateAuthorities = []types.Resource{{Source: ptr.To(dataURL(o.RootCA))}}
	if len(o.Override) > 0 {
		if err := validateOverride(o.Override); err != nil {
			return nil, err
		}
		cfg.Ignition.Config.Merge = append(cfg.Ignition.Config.Merge, types.Resource{Source: ptr.To(dataURL(o.Override))})
	}
	return marshalValid(cfg)
}

// validateOverride accepts any Ignition 3.x config up to 3.4 without errors.
func validateOverride(raw []byte) error {
	_, rpt, err := v3_4.ParseCompatibleVersion(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOverride, err)
	}
	if rpt.IsFatal() {
		return fmt.Errorf("%w: %s", ErrInvalidOverride, rpt.String())
	}
	return nil
}

// Validate parses an Ignition config as Ignition itself would.
func Validate(raw []byte) error {
	_, rpt, err := v3_4.Parse(raw)
	if err != nil {
		// Ignition's report says what is wrong and where; its error only
		// that something is.
		if r := strings.TrimSpace(rpt.String()); r != "" {
			return fmt.Errorf("%w: %s", err, r)
		}
		return err
	}
	if rpt.IsFatal() {
		return errors.New(rpt.String())
	}
	return nil
}

func marshalValid(cfg types.Config) ([]byte, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := Validate(data); err != nil {
		return nil, fmt.Errorf("rendered an invalid config: %w", err)
	}
	return data, nil
}

func dataURL(data []byte) string {
	return "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString(data)
}

// RemoteOptions describe a config served from elsewhere.
type RemoteOptions struct {
	// URL is where the full config is served.
	URL string
	// Token is sent as "Authorization: Bearer <token>".
	Token string
	// CA is the PEM of the CA that signs the server's certificate (https).
	CA []byte
	// Full is the config served; its SHA-512 is pinned in the pointer.
	Full []byte
}

// Remote renders a small config that merges the full config from URL,
// authenticated by a bearer token and verified by its SHA-512: how a
// config too large for user data still reaches a machine.
func Remote(o RemoteOptions) ([]byte, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("ignition server URL %q: want http(s)://host:port/path", o.URL)
	}
	if o.Token == "" {
		return nil, errors.New("a served config needs a token")
	}
	sum := sha512.Sum512(o.Full)
	cfg := types.Config{Ignition: types.Ignition{Version: Version}}
	cfg.Ignition.Config.Merge = []types.Resource{{
		Source:       ptr.To(u.String()),
		HTTPHeaders:  types.HTTPHeaders{{Name: "Authorization", Value: ptr.To("Bearer " + o.Token)}},
		Verification: types.Verification{Hash: ptr.To("sha512-" + hex.EncodeToString(sum[:]))},
	}}
	if len(o.CA) > 0 {
		cfg.Ignition.Security.TLS.CertificateAuthorities = []types.Resource{{Source: ptr.To(dataURL(o.CA))}}
	}
	return marshalValid(cfg)
}

// RemoteToken is the bearer token of a config Remote rendered; false for
// any other config.
func RemoteToken(pointer []byte) (string, bool) {
	cfg, _, err := v3_4.Parse(pointer)
	if err != nil || len(cfg.Ignition.Config.Merge) != 1 {
		return "", false
	}
	for _, h := range cfg.Ignition.Config.Merge[0].HTTPHeaders {
		if h.Name == "Authorization" && h.Value != nil {
			if token, ok := strings.CutPrefix(*h.Value, "Bearer "); ok {
				return token, true
			}
		}
	}
	return "", false
}
