package record

import (
	"errors"
	"fmt"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// ErrCrossNamespace matches (errors.Is) the refusal of a reference to
// another namespace. A namespace is a tenant's: an object may only name
// objects of its own namespace, whatever upstream allows (an InfraEnv's
// clusterRef, an Agent's clusterDeploymentName, BMAC's cluster-reference
// annotation). The webhooks refuse such references, and every controller
// path that meets one (an object written before the webhook ran, or on a
// hub without webhooks) reports it and follows it nowhere. The refusal is
// an input error too (ErrInput).
var ErrCrossNamespace = errors.New("reference to another namespace")

// CrossNamespaceError is the refusal of a reference to another namespace.
type CrossNamespaceError struct {
	// Field is the reference's namespace field, as in
	// spec.clusterRef.namespace.
	Field string
	// Kind and Namespace are the referring object's.
	Kind, Namespace string
	// Named is the namespace the reference names.
	Named string
}

func (e *CrossNamespaceError) Error() string {
	return fmt.Sprintf("%s: %q is another namespace: a reference must stay in the %s's namespace %q", e.Field, e.Named, e.Kind, e.Namespace)
}

// Is makes errors.Is(err, ErrCrossNamespace) and errors.Is(err, ErrInput)
// true.
func (e *CrossNamespaceError) Is(target error) bool {
	return target == ErrCrossNamespace || target == ErrInput
}

// LocalReference refuses named when it is a namespace other than ns, the
// namespace of the kind's object whose field it is; empty is ns.
func LocalReference(kind, field, ns, named string) error {
	if named == "" || named == ns {
		return nil
	}
	return &CrossNamespaceError{Field: field, Kind: kind, Namespace: ns, Named: named}
}

// AgentClusterReference refuses an Agent's clusterDeploymentName in
// another namespace.
func AgentClusterReference(a *agentinstallv1.Agent) error {
	if ref := a.Spec.ClusterDeploymentName; ref != nil {
		return LocalReference("Agent", "spec.clusterDeploymentName.namespace", a.Namespace, ref.Namespace)
	}
	return nil
}

// InfraEnvClusterReference refuses an InfraEnv's clusterRef in another
// namespace.
func InfraEnvClusterReference(ie *agentinstallv1.InfraEnv) error {
	if ref := ie.Spec.ClusterRef; ref != nil {
		return LocalReference("InfraEnv", "spec.clusterRef.namespace", ie.Namespace, ref.Namespace)
	}
	return nil
}

// clusterDeploymentOf is the name of the ClusterDeployment an Agent is
// bound to, in its own namespace; "" when unbound or bound to another
// namespace's (refused).
func clusterDeploymentOf(a *agentinstallv1.Agent) string {
	ref := a.Spec.ClusterDeploymentName
	if ref == nil || AgentClusterReference(a) != nil {
		return ""
	}
	return ref.Name
}
