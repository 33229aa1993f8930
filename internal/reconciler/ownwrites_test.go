package reconciler

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// TestOwnWrites: behind a reader that lags (a cache holding an old copy),
// a Get returns the copy the client's own last write got back, metadata
// and status writes alike; once the reader has caught up, the reader's;
// an object the reader finds gone is gone. Other kinds are the reader's.
func TestOwnWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	reader := &heldReader{Client: env.Client, held: a.DeepCopy()}
	c := NewOwnWrites(reader, &agentinstallv1.Agent{})
	get := func() *agentinstallv1.Agent {
		got := &agentinstallv1.Agent{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
		return got
	}

	g.Expect(get().Annotations).To(BeEmpty(), "nothing written: the reader's copy")
	before := a.DeepCopy()
	a.Annotations = map[string]string{"contact": "1"}
	g.Expect(c.Patch(ctx, a, client.MergeFrom(before))).To(Succeed())
	g.Expect(get().Annotations).To(HaveKeyWithValue("contact", "1"), "the reader is behind: the written copy")
	before = a.DeepCopy()
	a.Status.DebugInfo.State = "known"
	g.Expect(c.Status().Patch(ctx, a, client.MergeFrom(before))).To(Succeed())
	got := get()
	g.Expect(got.Status.DebugInfo.State).To(Equal("known"))
	g.Expect(got.Annotations).To(HaveKeyWithValue("contact", "1"))

	// Caught up, and then written by another: the reader's copy.
	reader.held = nil
	other := get()
	other.Labels = map[string]string{"by": "other"}
	g.Expect(env.Client.Update(ctx, other)).To(Succeed())
	g.Expect(get().Labels).To(HaveKeyWithValue("by", "other"))

	// Gone.
	g.Expect(c.Patch(ctx, a, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"contact":"2"}}}`)))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, a)).To(Succeed())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(a), &agentinstallv1.Agent{}))).To(BeTrue())
}

// heldReader answers a Get of the held object with the held copy, as a
// cache behind the API does; nil holds nothing.
type heldReader struct {
	client.Client
	held *agentinstallv1.Agent
}

func (r *heldReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if a, ok := obj.(*agentinstallv1.Agent); ok && r.held != nil && key == client.ObjectKeyFromObject(r.held) {
		r.held.DeepCopyInto(a)
		return nil
	}
	return r.Client.Get(ctx, key, obj, opts...)
}
