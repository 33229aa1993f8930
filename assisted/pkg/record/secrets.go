package record

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// CachedLabel marks the Secrets the agent service reads from its cache:
// those it writes (install state, admin kubeconfig and password) and
// those an install refers to (pull secrets), labelled on their first
// read. The manager's own client reads every Secret from the API (it
// caches none, as Cluster API's), which cost an install about 29 GETs.
const CachedLabel = "agent-install.metalshift.io/cached"

// SecretCache is a cache of the Secrets labelled CachedLabel (their data
// kept, managed fields dropped), in namespace when one is given; it runs
// with mgr.
func SecretCache(mgr manager.Manager, namespace string) (cache.Cache, error) {
	opts := cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{CachedLabel: "true"})},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("creating the agent service's Secret cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}

// SecretClient is a client whose Secret reads come from a cache of the
// Secrets labelled CachedLabel. A Secret the cache does not hold (not
// labelled yet, or written moments ago; or the cache has not started) is
// read from the API, and
// labelled so that its next reads are the cache's. Everything else goes
// through Client.
type SecretClient struct {
	client.Client
	// Cache holds the labelled Secrets (SecretCache).
	Cache client.Reader
	// API reads Secrets the cache does not hold.
	API client.Reader
}

// Get reads obj; a Secret from the cache when it holds it.
func (c SecretClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	// The cache's answer stands when it has the Secret, when it failed
	// otherwise than by not holding it (or not having started), and when
	// the caller said a Secret the cache does not hold is not there yet.
	var notStarted *cache.ErrCacheNotStarted
	switch err := c.Cache.Get(ctx, key, s, opts...); {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		if slices.Contains(opts, CacheSuffices) {
			return err
		}
	case !errors.As(err, &notStarted):
		return err
	}
	if err := c.API.Get(ctx, key, s, opts...); err != nil {
		return err
	}
	if s.Labels[CachedLabel] == "true" {
		return nil
	}
	// A label is all this writes (a merge patch, which meets no conflict);
	// a Secret that cannot be labelled is read from the API next time too.
	before := s.DeepCopy()
	Cached(s)
	if err := c.Patch(ctx, s, client.MergeFrom(before)); err != nil {
		logf.FromContext(ctx).V(1).Info("Secret not labelled for the cache", "secret", key.String(), "error", err.Error())
		*s = *before
	}
	return nil
}

// cacheSuffices is CacheSuffices's type.
type cacheSuffices struct{}

func (cacheSuffices) ApplyToGet(*client.GetOptions) {}

// CacheSuffices tells SecretClient.Get that a Secret its cache does not
// hold is not found: one the agent service writes labelled, read where it
// is not written yet (an install's state before the install).
var CacheSuffices client.GetOption = cacheSuffices{}

// Cached labels a Secret the agent service writes for its cache.
func Cached(s *corev1.Secret) { metav1.SetMetaDataLabel(&s.ObjectMeta, CachedLabel, "true") }
