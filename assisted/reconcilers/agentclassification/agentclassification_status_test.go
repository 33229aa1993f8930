package agentclassification

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

func TestSetQueryErrorsCondition(t *testing.T) {
	then, now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)
	noErrors := agentinstallv1.Condition{Type: agentinstallv1.QueryErrorsCondition, Status: corev1.ConditionFalse,
		Reason: "NoQueryErrors", Message: "No Agents failed to apply the classification", LastTransitionTime: metav1.NewTime(then)}
	hasErrors := func(msg string, at time.Time) agentinstallv1.Condition {
		return agentinstallv1.Condition{Type: agentinstallv1.QueryErrorsCondition, Status: corev1.ConditionTrue,
			Reason: "HasQueryErrors", Message: msg, LastTransitionTime: metav1.NewTime(at)}
	}
	other := agentinstallv1.Condition{Type: "Other", Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(then)}
	tests := []struct {
		name   string
		before []agentinstallv1.Condition
		failed int
		want   []agentinstallv1.Condition
	}{
		{name: "first, no errors", failed: 0, want: []agentinstallv1.Condition{{Type: agentinstallv1.QueryErrorsCondition,
			Status: corev1.ConditionFalse, Reason: "NoQueryErrors", Message: "No Agents failed to apply the classification", LastTransitionTime: metav1.NewTime(now)}}},
		{name: "first, errors", failed: 3, want: []agentinstallv1.Condition{hasErrors("3 Agents failed to apply the classification", now)}},
		{name: "unchanged keeps its time", before: []agentinstallv1.Condition{other, noErrors}, failed: 0,
			want: []agentinstallv1.Condition{other, noErrors}},
		{name: "errors appear", before: []agentinstallv1.Condition{noErrors}, failed: 1,
			want: []agentinstallv1.Condition{hasErrors("1 Agents failed to apply the classification", now)}},
		{name: "more errors: new message, same transition", before: []agentinstallv1.Condition{hasErrors("1 Agents failed to apply the classification", then)},
			failed: 2, want: []agentinstallv1.Condition{hasErrors("2 Agents failed to apply the classification", then)}},
		{name: "errors gone", before: []agentinstallv1.Condition{hasErrors("2 Agents failed to apply the classification", then)}, failed: 0,
			want: []agentinstallv1.Condition{{Type: agentinstallv1.QueryErrorsCondition, Status: corev1.ConditionFalse, Reason: "NoQueryErrors",
				Message: "No Agents failed to apply the classification", LastTransitionTime: metav1.NewTime(now)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			list := append([]agentinstallv1.Condition(nil), tt.before...)
			setQueryErrorsCondition(&list, tt.failed, now)
			g.Expect(list).To(Equal(tt.want))
		})
	}
}
