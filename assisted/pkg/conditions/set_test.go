package conditions

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
)

// TestSet: a type already there is replaced in place, its transition time
// kept while its status stays (and its heartbeat always); a new type is
// appended; other types are kept.
func TestSet(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	list := []agentinstallv1.Condition{
		{Type: "Other", Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		{Type: TypeValidated, Status: corev1.ConditionFalse, Reason: "A", LastTransitionTime: metav1.NewTime(t0), LastHeartbeatTime: metav1.NewTime(t0)},
		{Type: TypeBound, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)},
	}
	Set(&list, t1,
		Cond{Type: TypeValidated, Status: corev1.ConditionFalse, Reason: "B", Message: "b"},
		Cond{Type: TypeBound, Status: corev1.ConditionTrue, Reason: "Bound"},
		Cond{Type: TypeConnected, Status: corev1.ConditionTrue, Reason: "C"})
	g.Expect(list).To(HaveLen(4))
	g.Expect(list[0].Type).To(Equal(agentinstallv1.ConditionType("Other")))
	g.Expect(list[1]).To(Equal(agentinstallv1.Condition{Type: TypeValidated, Status: corev1.ConditionFalse, Reason: "B", Message: "b",
		LastTransitionTime: metav1.NewTime(t0), LastHeartbeatTime: metav1.NewTime(t0)}), "same status: transition time kept")
	g.Expect(list[2].LastTransitionTime.Time).To(Equal(t1), "status changed")
	g.Expect(list[3]).To(Equal(agentinstallv1.Condition{Type: TypeConnected, Status: corev1.ConditionTrue, Reason: "C", LastTransitionTime: metav1.NewTime(t1)}))
}

// TestSetInstall: as Set, and lastProbeTime moves when anything but the
// times changed.
func TestSetInstall(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	var list []hivev1.ClusterInstallCondition
	SetInstall(&list, t0, Cond{Type: TypeCompleted, Status: corev1.ConditionFalse, Reason: "A", Message: "a"})
	SetInstall(&list, t1, Cond{Type: TypeCompleted, Status: corev1.ConditionFalse, Reason: "A", Message: "a"})
	g.Expect(list[0].LastProbeTime.Time).To(Equal(t0), "unchanged: not probed anew")
	SetInstall(&list, t1, Cond{Type: TypeCompleted, Status: corev1.ConditionFalse, Reason: "A", Message: "a, more"})
	g.Expect(list[0].LastProbeTime.Time).To(Equal(t1))
	g.Expect(list[0].LastTransitionTime.Time).To(Equal(t0))
	SetInstall(&list, t2, Cond{Type: TypeCompleted, Status: corev1.ConditionTrue, Reason: "B"})
	g.Expect(list).To(HaveLen(1))
	g.Expect(list[0].LastTransitionTime.Time).To(Equal(t2))
}
