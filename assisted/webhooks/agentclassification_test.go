package webhooks

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

func TestValidateAgentClassificationCreate(t *testing.T) {
	const keyRule = `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`
	tests := []struct {
		name string
		spec agentinstallv1.AgentClassificationSpec
		want []string // how the message starts, then parts of it; none for no refusal
	}{
		{name: "valid", spec: agentinstallv1.AgentClassificationSpec{LabelKey: "size", LabelValue: "large", Query: ".cpu.count >= 16"}},
		{name: "empty value and query", spec: agentinstallv1.AgentClassificationSpec{LabelKey: "size"}},
		{name: "bad key", spec: agentinstallv1.AgentClassificationSpec{LabelKey: "Bad Key", LabelValue: "large", Query: "true"},
			want: []string{`spec: Invalid value: "agentclassification.agent-install.openshift.io/Bad Key": ` + keyRule}},
		{name: "bad value", spec: agentinstallv1.AgentClassificationSpec{LabelKey: "size", LabelValue: "very large", Query: "true"},
			want: []string{`spec: Invalid value: "very large": a valid label must be an empty string or consist of alphanumeric characters`}},
		{name: "reserved value", spec: agentinstallv1.AgentClassificationSpec{LabelKey: "size", LabelValue: "QUERYERROR-large", Query: "true"},
			want: []string{`spec: Invalid value: "QUERYERROR-large": label must not start with QUERYERROR as this is reserved`}},
		{name: "bad query", spec: agentinstallv1.AgentClassificationSpec{LabelKey: "size", LabelValue: "large", Query: ".cpu.count >="},
			want: []string{`spec: Invalid value: ".cpu.count >=": unexpected EOF`}},
		{name: "all at once", spec: agentinstallv1.AgentClassificationSpec{LabelKey: "-size", LabelValue: "QUERYERROR", Query: "nope("},
			want: []string{`[spec: Invalid value: "agentclassification.agent-install.openshift.io/-size": ` + keyRule,
				`, spec: Invalid value: "QUERYERROR": label must not start with QUERYERROR as this is reserved`,
				`, spec: Invalid value: "nope(": unexpected EOF]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := (&AgentClassification{}).ValidateCreate(context.Background(), &agentinstallv1.AgentClassification{Spec: tt.spec})
			if len(tt.want) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(HavePrefix(tt.want[0]))
			for _, part := range tt.want[1:] {
				g.Expect(err.Error()).To(ContainSubstring(part))
			}
		})
	}
}

func TestValidateAgentClassificationUpdate(t *testing.T) {
	const modified = "Label modified: the specified label may not be modified after creation"
	old := agentinstallv1.AgentClassificationSpec{LabelKey: "size", LabelValue: "large", Query: ".cpu.count >= 16"}
	tests := []struct {
		name string
		edit func(*agentinstallv1.AgentClassificationSpec)
		want string
	}{
		{name: "query changed", edit: func(s *agentinstallv1.AgentClassificationSpec) { s.Query = ".cpu.count >= 32" }},
		{name: "key changed", edit: func(s *agentinstallv1.AgentClassificationSpec) { s.LabelKey = "big" }, want: modified},
		{name: "value changed", edit: func(s *agentinstallv1.AgentClassificationSpec) { s.LabelValue = "huge" }, want: modified},
		{name: "query broken", edit: func(s *agentinstallv1.AgentClassificationSpec) { s.Query = ".cpu.count >=" },
			want: `spec: Invalid value: ".cpu.count >=": unexpected EOF`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := &agentinstallv1.AgentClassification{Spec: old}
			tt.edit(&c.Spec)
			_, err := (&AgentClassification{}).ValidateUpdate(context.Background(), &agentinstallv1.AgentClassification{Spec: old}, c)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.want))
			g.Expect(apierrors.IsBadRequest(err)).To(BeTrue())
		})
	}

	// A query stored before this rule does not block other changes.
	g := NewWithT(t)
	broken := old
	broken.Query = "nope("
	_, err := (&AgentClassification{}).ValidateUpdate(context.Background(),
		&agentinstallv1.AgentClassification{Spec: broken}, &agentinstallv1.AgentClassification{Spec: broken})
	g.Expect(err).NotTo(HaveOccurred())
}
