package agentclusterinstall_test

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// TestInstallSecretsAreCached: the Secrets an install reads on every
// reconcile, its pull secret and its install state, carry the label of
// the agent service's Secret cache once the install started: the pull
// secret is labelled on its first read, the install state when written.
func TestInstallSecretsAreCached(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	in := newSNO(t, g, ns, "sno", nil)
	a := register(g, in.ie, "a9000000-0000-4000-8000-000000000001", "")
	updateAgent(g, a, func(a *agentinstallv1.Agent) { a.Spec.Approved = true })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusInstalling))
	}).Should(Succeed())
	for _, name := range []string{"pull-secret", "sno-install-state"} {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		g.Expect(s.Labels).To(HaveKeyWithValue(record.CachedLabel, "true"), name)
	}
}

// countingReader counts the reads that reach the API.
type countingReader struct {
	client.Reader
	n atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.n.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestSecretClientReadsFromItsCache: a Secret the cache does not hold is
// read from the API and labelled; once the cache saw the label, reads no
// longer reach the API and follow the Secret's changes. Other objects
// are read as the wrapped client reads them.
func TestSecretClientReadsFromItsCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	secrets, err := record.SecretCache(env.Manager, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool { return secrets.WaitForCacheSync(ctx) }).Should(BeTrue())
	api := &countingReader{Reader: env.Client}
	c := record.SecretClient{Client: env.Client, Cache: secrets, API: api}

	key := client.ObjectKey{Namespace: ns, Name: "pull"}
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Data: map[string][]byte{"k": []byte("v1")}})).To(Succeed())
	s := &corev1.Secret{}
	g.Expect(c.Get(ctx, key, s)).To(Succeed())
	g.Expect(s.Data).To(HaveKeyWithValue("k", []byte("v1")))
	g.Expect(api.n.Load()).To(Equal(int64(1)))
	g.Expect(env.Client.Get(ctx, key, s)).To(Succeed())
	g.Expect(s.Labels).To(HaveKeyWithValue(record.CachedLabel, "true"))

	// The cache sees the label; from then on no read reaches the API.
	g.Eventually(func(g Gomega) {
		before := api.n.Load()
		g.Expect(c.Get(ctx, key, &corev1.Secret{})).To(Succeed())
		g.Expect(api.n.Load()).To(Equal(before))
	}).Should(Succeed())
	before := api.n.Load()
	for range 10 {
		g.Expect(c.Get(ctx, key, &corev1.Secret{})).To(Succeed())
	}
	g.Expect(api.n.Load()).To(Equal(before))

	// A change reaches the cache.
	s.Data = map[string][]byte{"k": []byte("v2")}
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Secret{}
		g.Expect(c.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Data).To(HaveKeyWithValue("k", []byte("v2")))
	}).Should(Succeed())

	// A Secret that does not exist is not found, from the API.
	before = api.n.Load()
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "missing"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	g.Expect(api.n.Load()).To(Equal(before + 1))

	// Told that the cache suffices (a Secret the service writes labelled),
	// a miss is not found without a read from the API, even of a Secret
	// that exists unlabelled.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlabelled"}})).To(Succeed())
	before = api.n.Load()
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "unlabelled"}, &corev1.Secret{}, record.CacheSuffices)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	g.Expect(api.n.Load()).To(Equal(before))
}
