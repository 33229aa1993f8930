package agentclassification

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// Messages of the QueryErrors condition (upstream's).
const (
	msgHasQueryErrors = "%d Agents failed to apply the classification"
	msgNoQueryErrors  = "No Agents failed to apply the classification"
)

// setStatus records the counts of a classification's Agents and its
// QueryErrors condition at now.
func setStatus(st *agentinstallv1.AgentClassificationStatus, matched, failed int, now time.Time) {
	st.MatchedCount, st.ErrorCount = matched, failed
	setQueryErrorsCondition(&st.Conditions, failed, now)
}

// setQueryErrorsCondition sets the QueryErrors condition: True
// HasQueryErrors when the query failed on some Agents, else False
// NoQueryErrors. Its lastTransitionTime moves only when its status does,
// and its lastHeartbeatTime stays unset, as upstream's.
func setQueryErrorsCondition(list *[]agentinstallv1.Condition, failed int, now time.Time) {
	c := agentinstallv1.Condition{Type: agentinstallv1.QueryErrorsCondition, Status: corev1.ConditionFalse,
		Reason: agentinstallv1.QueryNoErrorsReason, Message: msgNoQueryErrors, LastTransitionTime: metav1.NewTime(now)}
	if failed > 0 {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, agentinstallv1.QueryHasErrorsReason, fmt.Sprintf(msgHasQueryErrors, failed)
	}
	for i := range *list {
		old := &(*list)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	*list = append(*list, c)
}
