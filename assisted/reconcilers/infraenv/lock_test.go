package infraenv_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/conditions"
	"github.com/metalshift/metalshift/assisted/reconcilers/infraenv"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// TestManualBootKept: the agent service adds its ImageBootedByHand
// condition to an InfraEnv after the reconciler read it; the reconciler's
// status write, from the copy without it, loses the conflict and is a
// requeue, and the condition stays. The reconciler runs here on a client
// that has the service write behind its read; it names its own events
// URL, so that its read always differs from what it writes.
func TestManualBootKept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lab",
		Annotations: map[string]string{agentinstallv1.EnableIronicAgentAnnotation: "true"}},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "none"}}}
	g.Expect(env.Client.Create(ctx, ie)).To(Succeed())
	key := client.ObjectKeyFromObject(ie)

	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	c := interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, k, o, opts...); err != nil {
				return err
			}
			if _, ok := o.(*agentinstallv1.InfraEnv); !ok || k != key {
				return nil
			}
			// The agent service, after the read.
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := &agentinstallv1.InfraEnv{}
				if err := env.Client.Get(ctx, key, cur); err != nil {
					return err
				}
				cur.Status.Conditions = append(cur.Status.Conditions, agentinstallv1.Condition{Type: conditions.ManualBootCondition,
					Status: corev1.ConditionTrue, Reason: conditions.ManualBootReason, Message: "booted by hand", LastTransitionTime: metav1.Now()})
				return env.Client.Status().Update(ctx, cur)
			})
		},
	})
	r := &infraenv.Reconciler{Client: c, Clock: clk, EventsURL: func(...string) string { return "http://events.example.com" }}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(reconciler.ConflictRequeue), "the lost write is a requeue")
	g.Expect(env.Client.Get(ctx, key, ie)).To(Succeed())
	g.Expect(ie.Status.Conditions).To(ContainElement(HaveField("Type", agentinstallv1.ConditionType(conditions.ManualBootCondition))),
		"the write from the stale copy did not replace the service's condition")
}
