package conditions

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
)

// Set writes conds into list, the conditions of an Agent, an InfraEnv or
// another custom-resource-status shaped object, at now: a condition of a
// type already there is replaced in place, keeping its lastTransitionTime
// while its status stays and its lastHeartbeatTime; a new type is
// appended; the other types are kept. The one writer of the list calls it
// (docs/agent-install.md, status ownership).
func Set(list *[]agentinstallv1.Condition, now time.Time, conds ...Cond) {
	now = stored(now)
	for _, c := range conds {
		n := agentinstallv1.Condition{Type: agentinstallv1.ConditionType(c.Type), Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastTransitionTime: metav1.NewTime(now)}
		i := index(*list, func(o agentinstallv1.Condition) bool { return string(o.Type) == c.Type })
		if i < 0 {
			*list = append(*list, n)
			continue
		}
		o := (*list)[i]
		n.LastHeartbeatTime = o.LastHeartbeatTime
		if o.Status == n.Status && !o.LastTransitionTime.IsZero() {
			n.LastTransitionTime = o.LastTransitionTime
		}
		(*list)[i] = n
	}
}

// SetInstall is Set for hive's ClusterInstallConditions (an
// AgentClusterInstall's): lastProbeTime moves when anything but the times
// changed.
func SetInstall(list *[]hivev1.ClusterInstallCondition, now time.Time, conds ...Cond) {
	now = stored(now)
	for _, c := range conds {
		n := hivev1.ClusterInstallCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastTransitionTime: metav1.NewTime(now), LastProbeTime: metav1.NewTime(now)}
		i := index(*list, func(o hivev1.ClusterInstallCondition) bool { return o.Type == c.Type })
		if i < 0 {
			*list = append(*list, n)
			continue
		}
		o := (*list)[i]
		if o.Status == n.Status && !o.LastTransitionTime.IsZero() {
			n.LastTransitionTime = o.LastTransitionTime
		}
		if o.Status == n.Status && o.Reason == n.Reason && o.Message == n.Message {
			n.LastProbeTime = o.LastProbeTime
		}
		(*list)[i] = n
	}
}

// stored is now as the API stores a condition's time (to the second): the
// object in hand after its patch says what was written, and what is read
// from the time (a metric of the install's duration) does not depend on
// whether the object was read back.
func stored(now time.Time) time.Time { return metav1.NewTime(now).Rfc3339Copy().Time }

func index[T any](list []T, match func(T) bool) int {
	for i, o := range list {
		if match(o) {
			return i
		}
	}
	return -1
}
