// Package cloud is what the Equinix Metal reconcilers share: the API
// client of a cluster's project, made from the key in its credentials
// Secret, and the signed iPXE script its devices boot. The tags that mark
// what the provider created (so that it finds its devices and addresses
// again from the API alone) are the API's (api/infrastructure/v1alpha1).
package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
)

// ErrCredentials is wrapped by the errors of a missing or unusable
// credentials Secret, which the reconcilers report as
// CredentialsUnavailable.
var ErrCredentials = errors.New("credentials unavailable")

// Options are what the hub gives every client.
type Options struct {
	// HTTP makes the requests (nil: a client with a 30 s timeout).
	HTTP *http.Client
	// UserAgent names metalshift to the API.
	UserAgent string
	// Driver makes the client of a project's API (metalclient.API says
	// what another metal cloud's driver implements); nil is Equinix
	// Metal's, metalclient.New.
	Driver func(metalclient.Options) (metalclient.API, error)
}

// equinixDriver is the Equinix Metal driver.
func equinixDriver(o metalclient.Options) (metalclient.API, error) { return metalclient.New(o) }

// Client returns the API client of emc's project: its key is read from
// the credentials Secret, in emc's namespace, at each call (a rotated key
// is used at once) and is held nowhere else.
func Client(ctx context.Context, r client.Reader, emc *infrav1.EquinixMetalCluster, o Options) (metalclient.API, error) {
	s := &corev1.Secret{}
	name := emc.Spec.CredentialsRef.Name
	if err := r.Get(ctx, client.ObjectKey{Namespace: emc.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s (spec.credentialsRef) does not exist", ErrCredentials, name)
		}
		return nil, err
	}
	key := strings.TrimSpace(string(s.Data[infrav1.EquinixMetalAPIKeyKey]))
	if key == "" {
		return nil, fmt.Errorf("%w: Secret %s (spec.credentialsRef) has no key %s", ErrCredentials, name, infrav1.EquinixMetalAPIKeyKey)
	}
	hc := o.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	driver := o.Driver
	if driver == nil {
		driver = equinixDriver
	}
	c, err := driver(metalclient.Options{BaseURL: emc.Spec.APIURL, Token: key, HTTPClient: hc, UserAgent: o.UserAgent})
	if err != nil {
		return nil, fmt.Errorf("spec.apiURL: %w", err)
	}
	return c, nil
}

// Refused tells whether err is the API refusing the key (401, or 403 for
// the project): the credentials, not the request, are wrong.
func Refused(err error) bool {
	return metalclient.IsUnauthorized(err) || metalclient.IsForbidden(err)
}

// BootScriptTTL is how long the iPXE script URL a device is created with
// stays valid: a device may wait queued for hardware before it boots.
const BootScriptTTL = 24 * time.Hour

// BootScript is the URL of the iPXE script the hub's deploy server (at
// its plain-http boot URL base) serves a machine's device: metalshift's
// live image running the metal cloud installer, which reads the cluster's
// metadata service and writes the machine's image. The URL is signed with
// key for the machine until now+BootScriptTTL, and carries all it boots.
func BootScript(base string, key []byte, now time.Time, emm *infrav1.EquinixMetalMachine, emc *infrav1.EquinixMetalCluster) (string, error) {
	if emm.Spec.Image == nil {
		return "", errors.New("spec.image is empty: the live image has no OS image to write")
	}
	md := emc.Spec.MetadataURL
	if md == "" {
		md = infrav1.EquinixMetalDefaultMetadataURL
	}
	img := emm.Spec.Image
	q, err := deployapi.SignMetalCloudQuery(key, deployapi.MetalCloudBoot{
		Machine: emm.Namespace + "/" + emm.Name + "/" + string(emm.UID),
		MetalCloud: deployapi.MetalCloud{MetadataURL: strings.TrimSuffix(md, "/"),
			Image: deployapi.Image{URL: img.URL, Checksum: img.Checksum, ChecksumType: img.ChecksumType, Format: img.Format}},
	}, now.Add(BootScriptTTL))
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(base, "/") + deployapi.MetalCloudScriptPath + "?" + q, nil
}
