package webhooks

import (
	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
)

// namespaceRef is a reference's namespace field as written: its path and
// the namespace it names ("" is the object's own).
type namespaceRef struct {
	field, named string
}

// crossNamespace refuses, as a bad request with record's message, the
// first of refs naming a namespace other than ns, kind's object's. On an
// update (old is the previous version's refs) a reference already there,
// unchanged, is let through: an object written before this webhook ran can
// still be updated (its finalizers removed, say); the controllers follow
// it nowhere.
func crossNamespace(kind, ns string, refs, old []namespaceRef) error {
	for _, r := range refs {
		err := rec.LocalReference(kind, r.field, ns, r.named)
		if err == nil {
			continue
		}
		had := false
		for _, o := range old {
			had = had || o == r
		}
		if !had {
			return badRequest(err.Error())
		}
	}
	return nil
}

// infraEnvRefs are an InfraEnv's references with a namespace.
func infraEnvRefs(ie *agentinstallv1.InfraEnv) []namespaceRef {
	var refs []namespaceRef
	if r := ie.Spec.ClusterRef; r != nil {
		refs = append(refs, namespaceRef{"spec.clusterRef.namespace", r.Namespace})
	}
	if r := ie.Spec.MirrorRegistryRef; r != nil {
		refs = append(refs, namespaceRef{"spec.mirrorRegistryRef.namespace", r.Namespace})
	}
	return refs
}

// agentRefs are an Agent's references with a namespace.
func agentRefs(a *agentinstallv1.Agent) []namespaceRef {
	var refs []namespaceRef
	if r := a.Spec.ClusterDeploymentName; r != nil {
		refs = append(refs, namespaceRef{"spec.clusterDeploymentName.namespace", r.Namespace})
	}
	if r := a.Spec.IgnitionEndpointTokenReference; r != nil {
		refs = append(refs, namespaceRef{"spec.ignitionEndpointTokenReference.namespace", r.Namespace})
	}
	return refs
}

// aciRefs are an AgentClusterInstall's references with a namespace.
func aciRefs(aci *hiveextv1.AgentClusterInstall) []namespaceRef {
	var refs []namespaceRef
	if e := aci.Spec.IgnitionEndpoint; e != nil && e.CaCertificateReference != nil {
		refs = append(refs, namespaceRef{"spec.ignitionEndpoint.caCertificateReference.namespace", e.CaCertificateReference.Namespace})
	}
	if r := aci.Spec.MirrorRegistryRef; r != nil {
		refs = append(refs, namespaceRef{"spec.mirrorRegistryRef.namespace", r.Namespace})
	}
	return refs
}
