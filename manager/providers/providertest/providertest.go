package providertest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/manager/providers"
)

// InstallRBAC creates, with the admin client c, the provider's namespace
// and the RBAC objects of its components: its ServiceAccount, roles and
// bindings, as clusterctl would. Objects that exist already are left as
// they are.
func InstallRBAC(ctx context.Context, c client.Client, p providers.Provider) error {
	objs, err := p.RBAC()
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace()}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, o := range objs {
		obj, ok := o.(client.Object)
		if !ok {
			return fmt.Errorf("%T is not a client.Object", o)
		}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	return nil
}

// User is the user name of the provider's ServiceAccount.
func User(p providers.Provider) string {
	return "system:serviceaccount:" + p.Namespace() + ":" + providers.ServiceAccountName
}

// AsServiceAccount returns a copy of admin (which may impersonate) that
// acts as the provider's ServiceAccount, with the groups the API server
// gives a ServiceAccount's token, and records every request the API
// server refuses (403) in the returned Refusals.
func AsServiceAccount(admin *rest.Config, p providers.Provider) (*rest.Config, *Refusals) {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: User(p),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + p.Namespace(), "system:authenticated"},
	}
	r := &Refusals{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &recorder{next: rt, refusals: r} })
	return cfg, r
}

// Refusals are the requests the API server refused, as "VERB path".
type Refusals struct {
	mu   sync.Mutex
	list []string
}

// List returns the refused requests, each once, in order.
func (r *Refusals) List() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

func (r *Refusals) add(req *http.Request) {
	what := req.Method + " " + req.URL.Path
	if req.URL.Query().Get("watch") == "true" {
		what = "WATCH " + req.URL.Path
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.list, what) {
		r.list = append(r.list, what)
	}
}

type recorder struct {
	next     http.RoundTripper
	refusals *Refusals
}

func (t *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		t.refusals.add(req)
	}
	return resp, err
}
