// Package cloud is what the Equinix Metal reconcilers share: the API
// client of a cluster's project, made from the key in its credentials
// Secret, and the tags that mark what the provider created, so that it
// finds its devices and addresses again from the API alone (after a
// restart, or a write whose answer was lost).
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

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
)

// Tags the provider sets. Each is "<prefix><value>": the API filters
// devices by one whole tag.
const (
	// ClusterTagPrefix marks what belongs to a cluster: its devices and
	// its elastic IPs, "metalshift.io/cluster=<namespace>/<name>".
	ClusterTagPrefix = "metalshift.io/cluster="
	// MachineTagPrefix marks a machine's device by the
	// EquinixMetalMachine's UID.
	MachineTagPrefix = "metalshift.io/machine="
	// RoleTagPrefix marks a device's role (control-plane or worker), or
	// an elastic IP's (api or ingress).
	RoleTagPrefix = "metalshift.io/role="
)

// Roles, as tagged.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
	RoleAPI          = "api"
	RoleIngress      = "ingress"
)

// ClusterTag is the tag of what belongs to the cluster namespace/name.
func ClusterTag(namespace, name string) string {
	return ClusterTagPrefix + namespace + "/" + name
}

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
}

// Client returns the API client of emc's project: its key is read from
// the credentials Secret, in emc's namespace, at each call (a rotated key
// is used at once) and is held nowhere else.
func Client(ctx context.Context, r client.Reader, emc *infrav1.EquinixMetalCluster, o Options) (*metalclient.Client, error) {
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
	c, err := metalclient.New(metalclient.Options{BaseURL: emc.Spec.APIURL, Token: key, HTTPClient: hc, UserAgent: o.UserAgent})
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

// Backoff is how long to wait after an API error: what a 429 says, else
// a pause for a server error; 0 for other errors (the controller's own
// backoff applies).
func Backoff(err error, now time.Time) time.Duration {
	switch {
	case metalclient.IsRateLimited(err):
		if d := metalclient.RetryAfter(err, now); d > 0 {
			return d
		}
		return 10 * time.Second
	case metalclient.IsServerError(err):
		return 5 * time.Second
	}
	return 0
}
