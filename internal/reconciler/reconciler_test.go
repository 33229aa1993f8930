package reconciler

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// No controller runs: the tests call the skeleton as a reconciler would.
func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }

// TestBeginEnd: Begin writes the Paused condition and stops while the
// object or its Cluster is paused; End patches the owned conditions in any
// case, and moves observedGeneration only after a reconcile that succeeded.
func TestBeginEnd(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	obj := &infrav1.MetalCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
	get := func() *infrav1.MetalCluster {
		o := &infrav1.MetalCluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), o)).To(Succeed())
		return o
	}
	const owned = "Tested"
	reconcile := func(o *infrav1.MetalCluster, cluster *clusterv1.Cluster, fail error) (stopped bool) {
		run, stop, err := Begin(ctx, env.Client, cluster, o, owned)
		g.Expect(err).NotTo(HaveOccurred())
		if stop {
			return true
		}
		conditions.Set(o, metav1.Condition{Type: owned, Status: metav1.ConditionFalse, Reason: "Tried"})
		reterr := fail
		run.End(ctx, &reterr)
		g.Expect(errors.Is(reterr, fail) || (fail == nil && reterr == nil)).To(BeTrue(), "End keeps the reconcile's error: %v", reterr)
		return false
	}

	// The first Begin writes Paused=False and stops: that write wakes the object again.
	g.Expect(reconcile(get(), nil, nil)).To(BeTrue())
	o := get()
	g.Expect(conditions.Get(o, clusterv1.PausedCondition)).To(HaveField("Status", metav1.ConditionFalse))
	g.Expect(o.Status.ObservedGeneration).To(BeZero())

	// A failed reconcile: its conditions are written, observedGeneration is not.
	g.Expect(reconcile(o, nil, errors.New("boom"))).To(BeFalse())
	o = get()
	g.Expect(conditions.Get(o, owned)).NotTo(BeNil())
	g.Expect(o.Status.ObservedGeneration).To(BeZero(), "not after a failed reconcile")

	g.Expect(reconcile(o, nil, nil)).To(BeFalse())
	o = get()
	g.Expect(o.Status.ObservedGeneration).To(Equal(o.Generation), "after a reconcile that succeeded")

	// A new generation: the Paused condition follows it too.
	o.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "192.0.2.2", Port: 6443}
	g.Expect(env.Client.Update(ctx, o)).To(Succeed())
	g.Expect(reconcile(o, nil, nil)).To(BeFalse())
	o = get()
	g.Expect(o.Status.ObservedGeneration).To(Equal(o.Generation))
	g.Expect(conditions.Get(o, clusterv1.PausedCondition).ObservedGeneration).To(Equal(o.Generation))

	// Paused by its Cluster: the condition says why, nothing else happens.
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	o.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "192.0.2.1", Port: 6443}
	g.Expect(env.Client.Update(ctx, o)).To(Succeed())
	g.Expect(reconcile(o, cluster, nil)).To(BeTrue())
	o = get()
	c := conditions.Get(o, clusterv1.PausedCondition)
	g.Expect(c).To(HaveField("Status", metav1.ConditionTrue))
	g.Expect(c.Message).To(Equal("Cluster spec.paused is set to true"))
	g.Expect(o.Status.ObservedGeneration).To(Equal(o.Generation-1), "a paused object's new generation is not reconciled")
	g.Expect(reconcile(o, cluster, nil)).To(BeTrue(), "still paused")

	// Resumed: the next reconcile catches up.
	cluster.Spec.Paused = nil
	g.Expect(reconcile(get(), cluster, nil)).To(BeTrue(), "the condition turns False first")
	g.Expect(reconcile(get(), cluster, nil)).To(BeFalse())
	o = get()
	g.Expect(conditions.Get(o, clusterv1.PausedCondition)).To(HaveField("Status", metav1.ConditionFalse))
	g.Expect(o.Status.ObservedGeneration).To(Equal(o.Generation))
}

// TestPhases: in order over one scope, stopping at the first error, with
// the soonest requeue any phase asked for.
func TestPhases(t *testing.T) {
	g := NewWithT(t)
	var ran []string
	phase := func(name string, after time.Duration, err error) Phase[*[]string] {
		return func(_ context.Context, s *[]string) (ctrl.Result, error) {
			*s = append(*s, name)
			return ctrl.Result{RequeueAfter: after}, err
		}
	}
	res, err := Phases(context.Background(), &ran, phase("a", 0, nil), phase("b", time.Minute, nil), phase("c", 5*time.Second, nil), phase("d", 0, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ran).To(Equal([]string{"a", "b", "c", "d"}))
	g.Expect(res.RequeueAfter).To(Equal(5 * time.Second))

	ran = nil
	boom := errors.New("boom")
	res, err = Phases(context.Background(), &ran, phase("a", time.Minute, nil), phase("b", 0, boom), phase("c", time.Second, nil))
	g.Expect(err).To(MatchError(boom))
	g.Expect(ran).To(Equal([]string{"a", "b"}), "nothing after the error")
	g.Expect(res.RequeueAfter).To(Equal(time.Minute))
}

// TestStartEnd: two writers of different status fields of one object, each
// starting from the same (soon stale) copy, both land: End patches only
// what its reconcile changed, with no resourceVersion.
func TestStartEnd(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	one, other := a.DeepCopy(), a.DeepCopy()

	run, err := Start(env.Client, one)
	g.Expect(err).NotTo(HaveOccurred())
	one.Status.DebugInfo.State = "known"
	var reterr error
	run.End(ctx, &reterr)
	g.Expect(reterr).NotTo(HaveOccurred())
	g.Expect(run.Patched()).To(BeTrue())

	run, err = Start(env.Client, other) // the copy from before the first write
	g.Expect(err).NotTo(HaveOccurred())
	other.Status.Bootstrap = true
	run.End(ctx, &reterr)
	g.Expect(reterr).NotTo(HaveOccurred())

	got := &agentinstallv1.Agent{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
	g.Expect(got.Status.DebugInfo.State).To(Equal("known"), "the other writer's patch kept this field")
	g.Expect(got.Status.Bootstrap).To(BeTrue())

	// An object deleted meanwhile is not an error.
	run, err = Start(env.Client, got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
	got.Status.DebugInfo.State = "insufficient"
	run.End(ctx, &reterr)
	g.Expect(reterr).NotTo(HaveOccurred())
}

// TestRequeueOnConflict: a lost optimistic write is a requeue, never an
// error the controller logs or a write dropped; other errors stay errors.
func TestRequeueOnConflict(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	stale := a.DeepCopy()
	a.Status.Bootstrap = true
	g.Expect(env.Client.Status().Update(ctx, a)).To(Succeed())
	stale.Status.DebugInfo.State = "known"
	err := env.Client.Status().Update(ctx, stale)
	res, err := RequeueOnConflict(ctrl.Result{RequeueAfter: time.Minute}, err)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(ConflictRequeue))

	boom := errors.New("boom")
	res, err = RequeueOnConflict(ctrl.Result{RequeueAfter: time.Minute}, boom)
	g.Expect(err).To(MatchError(boom))
	g.Expect(res.RequeueAfter).To(Equal(time.Minute))
}

// TestLockStatus: a status list with two writers (hive-style conditions a
// merge patch replaces whole) is written under the lock: from a stale
// copy the write loses, nothing of it lands, and the conflict is a
// requeue; the reconcile run again on the newer object keeps the other
// writer's entry and lands its own.
func TestLockStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Name: "ie", Namespace: ns},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull"}}}
	g.Expect(env.Client.Create(ctx, ie)).To(Succeed())
	stale := ie.DeepCopy()

	// The other writer adds its condition.
	other := agentinstallv1.Condition{Type: "Other", Status: "True", Reason: "Other", LastTransitionTime: metav1.Now()}
	ie.Status.Conditions = append(ie.Status.Conditions, other)
	g.Expect(env.Client.Status().Update(ctx, ie)).To(Succeed())

	mine := agentinstallv1.Condition{Type: "Mine", Status: "True", Reason: "Mine", LastTransitionTime: metav1.Now()}
	reconcile := func(o *agentinstallv1.InfraEnv) (ctrl.Result, error) {
		run, err := Start(env.Client, o, LockStatus())
		g.Expect(err).NotTo(HaveOccurred())
		o.Annotations = map[string]string{"mine": "yes"}
		o.Status.Conditions = append(o.Status.Conditions, mine)
		var reterr error
		run.End(ctx, &reterr)
		return RequeueOnConflict(ctrl.Result{}, reterr)
	}
	get := func() *agentinstallv1.InfraEnv {
		o := &agentinstallv1.InfraEnv{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ie), o)).To(Succeed())
		return o
	}

	res, err := reconcile(stale)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(ConflictRequeue), "the lost write is a requeue")
	got := get()
	g.Expect(got.Status.Conditions).To(HaveLen(1), "the stale list did not replace the other writer's")
	g.Expect(got.Annotations).NotTo(HaveKey("mine"), "nothing else of a lost write lands")

	res, err = reconcile(got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeZero())
	got = get()
	g.Expect(got.Status.Conditions).To(ConsistOf(HaveField("Type", agentinstallv1.ConditionType("Other")), HaveField("Type", agentinstallv1.ConditionType("Mine"))))
	g.Expect(got.Annotations).To(HaveKeyWithValue("mine", "yes"))
}

// TestStatusFirst: with StatusFirst the status is written first, as a
// patch of what changed with no resourceVersion (from a stale copy it keeps
// the other writer's field, and loses no conflict), and the metadata after
// it; when the status is refused, the metadata is not written, so that an
// annotation saying the status is stored is never written without it.
func TestStatusFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	stale := a.DeepCopy()
	a.Status.Bootstrap = true
	g.Expect(env.Client.Status().Update(ctx, a)).To(Succeed())
	get := func() *agentinstallv1.Agent {
		o := &agentinstallv1.Agent{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), o)).To(Succeed())
		return o
	}

	run, err := Start(env.Client, stale, StatusFirst())
	g.Expect(err).NotTo(HaveOccurred())
	stale.Status.DebugInfo.State = "known"
	stale.Annotations = map[string]string{"applied": "known"}
	var reterr error
	run.End(ctx, &reterr)
	g.Expect(reterr).NotTo(HaveOccurred())
	g.Expect(run.Patched()).To(BeTrue())
	got := get()
	g.Expect(got.Status.DebugInfo.State).To(Equal("known"))
	g.Expect(got.Status.Bootstrap).To(BeTrue(), "the other writer's field stays")
	g.Expect(got.Annotations).To(HaveKeyWithValue("applied", "known"))

	run, err = Start(env.Client, got, StatusFirst())
	g.Expect(err).NotTo(HaveOccurred())
	got.Status.Role = "boss" // refused by the schema
	got.Annotations["applied"] = "boss"
	run.End(ctx, &reterr)
	g.Expect(reterr).To(HaveOccurred())
	g.Expect(run.Patched()).To(BeFalse())
	g.Expect(get().Annotations).To(HaveKeyWithValue("applied", "known"), "no metadata after a refused status")
}

// TestOneStatusWrite: with OneStatusWrite a reconcile that changes owned
// conditions and other status fields writes the status in one patch; from
// a stale copy that patch loses a conflict, and End applies the
// reconcile's changes to the object read again: the other writer's
// condition and field stay, and nothing is lost.
func TestOneStatusWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	host := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: ns},
		Spec: metal3v1.BareMetalHostSpec{BMC: metal3v1.BMCDetails{Address: "redfish://192.0.2.1/redfish/v1/Systems/1", CredentialsName: "bmc"}}}
	g.Expect(env.Client.Create(ctx, host)).To(Succeed())
	host.Status.ErrorType, host.Status.ErrorMessage = metal3v1.RegistrationError, "failed"
	g.Expect(env.Client.Status().Update(ctx, host)).To(Succeed())
	stale := host.DeepCopy()

	// The other writer adds its condition and writes a field of its own.
	conditions.Set(host, metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "Other"})
	host.Status.ErrorCount = 3
	g.Expect(env.Client.Status().Update(ctx, host)).To(Succeed())

	var statusPatches, conflicts int
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	c := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			statusPatches++
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		},
	})
	reconcile := func(o *metal3v1.BareMetalHost, change func(*metal3v1.BareMetalHost)) {
		statusPatches, conflicts = 0, 0
		run, err := Start(c, o, OwnedConditions("Mine"), OneStatusWrite())
		g.Expect(err).NotTo(HaveOccurred())
		change(o)
		var reterr error
		run.End(ctx, &reterr)
		g.Expect(reterr).NotTo(HaveOccurred())
		g.Expect(run.Patched()).To(BeTrue())
	}
	get := func() *metal3v1.BareMetalHost {
		o := &metal3v1.BareMetalHost{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(host), o)).To(Succeed())
		return o
	}

	reconcile(stale, func(o *metal3v1.BareMetalHost) {
		conditions.Set(o, metav1.Condition{Type: "Mine", Status: metav1.ConditionFalse, Reason: "Mine"})
		o.Status.PoweredOn = true
		o.Status.ErrorType = ""
	})
	g.Expect(statusPatches).To(Equal(2), "the stale patch, then one on the object read again")
	g.Expect(conflicts).To(Equal(1))
	got := get()
	g.Expect(got.Status.Conditions).To(ConsistOf(HaveField("Type", "Other"), HaveField("Type", "Mine")))
	g.Expect(got.Status.ErrorCount).To(Equal(3), "the other writer's field stays")
	g.Expect(got.Status.PoweredOn).To(BeTrue())
	g.Expect(got.Status.ErrorType).To(BeEmpty(), "a field the reconcile cleared stays cleared")
	g.Expect(got.Status.ErrorMessage).To(Equal("failed"))

	// Metadata and conditions changed from the latest copy: the metadata
	// patch makes that copy old, and the status goes onto the object read
	// again, with no patch refused.
	reconcile(got, func(o *metal3v1.BareMetalHost) {
		o.Annotations = map[string]string{"mine": "yes"}
		conditions.Set(o, metav1.Condition{Type: "Mine", Status: metav1.ConditionUnknown, Reason: "Mine"})
		o.Status.ErrorCount = 4
	})
	g.Expect(statusPatches).To(Equal(1), "no status patch with the version the metadata patch made old")
	g.Expect(conflicts).To(BeZero())
	got = get()
	g.Expect(got.Annotations).To(HaveKeyWithValue("mine", "yes"))
	g.Expect(conditions.IsUnknown(got, "Mine")).To(BeTrue())
	g.Expect(got.Status.ErrorCount).To(Equal(4))
	g.Expect(got.Status.Conditions).To(ContainElement(HaveField("Type", "Other")))

	reconcile(got, func(o *metal3v1.BareMetalHost) {
		conditions.Set(o, metav1.Condition{Type: "Mine", Status: metav1.ConditionTrue, Reason: "Mine"})
		o.Status.PoweredOn = false
	})
	g.Expect(statusPatches).To(Equal(1), "conditions and fields in one patch")
	got = get()
	g.Expect(conditions.IsTrue(got, "Mine")).To(BeTrue())
	g.Expect(got.Status.PoweredOn).To(BeFalse())

	reconcile(got, func(*metal3v1.BareMetalHost) {})
	g.Expect(statusPatches).To(BeZero(), "nothing changed, nothing written")
}
