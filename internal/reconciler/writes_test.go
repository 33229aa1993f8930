package reconciler

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

// TestWrites: a copy of an object older than a write made through
// Writes.Client (its metadata or its status) is behind; the object as
// written, or newer, is not, and is current (has this process's last
// write). An object never written through it is neither behind nor
// current. Writes of other kinds, and failed writes, are not recorded.
func TestWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	w := NewWrites(&infrav1.MetalCluster{})
	c := w.Client(env.Client)

	obj := &infrav1.MetalCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}}
	g.Expect(c.Create(ctx, obj)).To(Succeed())
	created := obj.DeepCopy()
	g.Expect(w.Behind(created)).To(BeFalse(), "the object as created is not behind its creation")
	g.Expect(w.Current(created)).To(BeTrue())

	before := obj.DeepCopy()
	obj.Annotations = map[string]string{"a": "1"}
	g.Expect(c.Patch(ctx, obj, client.MergeFrom(before))).To(Succeed())
	annotated := obj.DeepCopy()
	before = obj.DeepCopy()
	conditions.Set(obj, metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Tested"})
	g.Expect(c.Status().Patch(ctx, obj, client.MergeFrom(before))).To(Succeed())

	g.Expect(w.Behind(created)).To(BeTrue(), "a copy from before the metadata write")
	g.Expect(w.Behind(annotated)).To(BeTrue(), "a copy from between the metadata and the status write")
	cur := &infrav1.MetalCluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur)).To(Succeed())
	g.Expect(w.Behind(cur)).To(BeFalse(), "the object as the API has it")
	g.Expect(w.Current(cur)).To(BeTrue())
	g.Expect(w.Current(annotated)).To(BeFalse(), "a copy without the last write is not current")
	g.Expect(w.Behind(created)).To(BeTrue(), "an old copy stays behind once a newer one was seen")

	// A write that failed (a stale resourceVersion) is not recorded.
	stale := created.DeepCopy()
	stale.Labels = map[string]string{"l": "1"}
	g.Expect(apierrors.IsConflict(c.Update(ctx, stale))).To(BeTrue())
	g.Expect(w.Current(cur)).To(BeTrue())

	// An object written by others only: nothing is known of it.
	other := &infrav1.MetalCluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	g.Expect(w.Behind(other)).To(BeFalse())
	g.Expect(w.Current(other)).To(BeFalse(), "never written through Writes: ask the API")

	// Another kind's writes are not recorded.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns}}
	g.Expect(c.Create(ctx, cm)).To(Succeed())
	old := cm.DeepCopy()
	cm.Data = map[string]string{"k": "v"}
	g.Expect(c.Update(ctx, cm)).To(Succeed())
	g.Expect(w.Behind(old)).To(BeFalse())

	// An object gone is forgotten.
	before = cur.DeepCopy()
	cur.Annotations["a"] = "2"
	g.Expect(c.Patch(ctx, cur, client.MergeFrom(before))).To(Succeed())
	g.Expect(w.Behind(before)).To(BeTrue())
	w.Forget(&infrav1.MetalCluster{}, client.ObjectKeyFromObject(cur))
	g.Expect(w.Behind(before)).To(BeFalse())
	g.Expect(w.Current(cur)).To(BeFalse(), "forgotten")

	var none *Writes
	g.Expect(none.Behind(before)).To(BeFalse(), "a nil Writes has none")
	g.Expect(none.Current(cur)).To(BeFalse())
}
