package console

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// Row is one object as a page shows it. The server derives rows; the
// browser only lays them out.
type Row struct {
	// Key identifies the row on its page: kind/namespace/name.
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Path is how a cluster is installed: "cluster-api" or "agent".
	Path  string `json:"path,omitempty"`
	State string `json:"state"`
	// Progress is a percentage, -1 when the object tells none.
	Progress int    `json:"progress"`
	Version  string `json:"version,omitempty"`
	// Detail is what else a person looks for first: a Cluster's control
	// plane, an Agent's cluster and role, a host's consumer.
	Detail string `json:"detail,omitempty"`
	// Failing is the first condition that says something is wrong, or a
	// host's error.
	Failing string `json:"failing,omitempty"`
	// Approved is an Agent's spec.approved; nil for other kinds.
	Approved *bool `json:"approved,omitempty"`
	// Power is a BareMetalHost's power state, "on" or "off".
	Power string `json:"power,omitempty"`
}

func newRow(kind string, o client.Object) Row {
	return Row{Key: kind + "/" + o.GetNamespace() + "/" + o.GetName(), Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), Progress: -1}
}

// deleting overrides a state while an object is being deleted.
func deleting(o client.Object, state string) string {
	if o.GetDeletionTimestamp() != nil {
		return "Deleting"
	}
	return state
}

// clusterRow shows a Cluster API Cluster: its phase, its control plane's
// replicas, and a progress derived from the phase and the machines ready.
func clusterRow(c *clusterv1.Cluster) Row {
	r := newRow("Cluster", c)
	r.Path = "cluster-api"
	r.State = deleting(c, orUnknown(c.Status.Phase))
	r.Version = c.Spec.Topology.Version
	cp, w := c.Status.ControlPlane, c.Status.Workers
	if cp != nil {
		r.Detail = fmt.Sprintf("control plane %d/%d ready", val(cp.ReadyReplicas), val(cp.DesiredReplicas))
		if r.Version == "" && len(cp.Versions) == 1 {
			r.Version = cp.Versions[0].Version
		}
	}
	r.Progress = clusterProgress(c.Status.Phase, cp, w)
	r.Failing = firstFalse(c.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ClusterControlPlaneInitializedCondition,
		clusterv1.ClusterControlPlaneAvailableCondition, clusterv1.ClusterWorkersAvailableCondition, clusterv1.ClusterRemoteConnectionProbeCondition)
	return r
}

// clusterProgress is 0 while a Cluster is Pending, 20 while its
// infrastructure is provisioned, then 40 plus the share of its desired
// machines (control plane and workers) that are ready.
func clusterProgress(phase string, cp *clusterv1.ClusterControlPlaneStatus, w *clusterv1.WorkersStatus) int {
	switch clusterv1.ClusterPhase(phase) {
	case clusterv1.ClusterPhasePending:
		return 0
	case clusterv1.ClusterPhaseProvisioning:
		return 20
	case clusterv1.ClusterPhaseProvisioned:
	default:
		return -1
	}
	var ready, desired int32
	if cp != nil {
		ready, desired = ready+val(cp.ReadyReplicas), desired+val(cp.DesiredReplicas)
	}
	if w != nil {
		ready, desired = ready+val(w.ReadyReplicas), desired+val(w.DesiredReplicas)
	}
	if desired == 0 {
		return 40
	}
	return 40 + int(60*min(ready, desired)/desired)
}

// firstFalse names the first of types (conditions that are good when
// True) that is False, with its message.
func firstFalse(conds []metav1.Condition, types ...string) string {
	for _, t := range types {
		for _, c := range conds {
			if c.Type == t && c.Status == metav1.ConditionFalse {
				return conditionText(c.Type, c.Reason, c.Message)
			}
		}
	}
	return ""
}

func conditionText(typ, reason, message string) string {
	s := typ
	if reason != "" {
		s += " (" + reason + ")"
	}
	if message != "" {
		s += ": " + message
	}
	return s
}

// aciRow shows an AgentClusterInstall: the agent service's state and the
// install's total percentage.
func aciRow(a *hiveextv1.AgentClusterInstall) Row {
	r := newRow("AgentClusterInstall", a)
	r.Path = "agent"
	r.State = deleting(a, orUnknown(a.Status.DebugInfo.State))
	r.Progress = int(a.Status.Progress.TotalPercentage)
	if a.Spec.ImageSetRef != nil {
		r.Version = a.Spec.ImageSetRef.Name
	}
	r.Detail = "ClusterDeployment " + a.Spec.ClusterDeploymentRef.Name
	for _, c := range a.Status.Conditions {
		bad := (c.Type == "Failed" && c.Status == corev1.ConditionTrue) ||
			(slices.Contains([]string{"SpecSynced", "Validated", "RequirementsMet"}, c.Type) && c.Status == corev1.ConditionFalse)
		if bad {
			r.Failing = conditionText(c.Type, c.Reason, c.Message)
			break
		}
	}
	return r
}

// cdRow shows a ClusterDeployment; ok is false for one installed by an
// AgentClusterInstall, whose row shows the cluster.
func cdRow(cd *hivev1.ClusterDeployment) (r Row, ok bool) {
	r = newRow("ClusterDeployment", cd)
	if ref := cd.Spec.ClusterInstallRef; ref != nil && ref.Kind == "AgentClusterInstall" {
		return r, false
	}
	r.Path = "agent"
	r.State = "Not installed"
	if cd.Spec.Installed {
		r.State, r.Progress = "Installed", 100
	}
	r.State = deleting(cd, r.State)
	for _, c := range cd.Status.Conditions {
		if strings.HasSuffix(c.Type, "Failed") && c.Status == corev1.ConditionTrue {
			r.Failing = conditionText(c.Type, c.Reason, c.Message)
			break
		}
	}
	return r, true
}

// agentRow shows an Agent: its state, its cluster and role, whether it
// is approved.
func agentRow(a *agentinstallv1.Agent) Row {
	r := newRow("Agent", a)
	r.State = deleting(a, orUnknown(a.Status.DebugInfo.State))
	approved := a.Spec.Approved
	r.Approved = &approved
	host := a.Spec.Hostname
	if host == "" {
		host = a.Status.Inventory.Hostname
	}
	var parts []string
	if host != "" {
		parts = append(parts, "host "+host)
	}
	if ref := a.Spec.ClusterDeploymentName; ref != nil {
		parts = append(parts, "cluster "+ref.Name)
	}
	if a.Spec.Role != "" {
		parts = append(parts, "role "+string(a.Spec.Role))
	}
	r.Detail = strings.Join(parts, ", ")
	return r
}

// hostRow shows a BareMetalHost: provisioning state, power, consumer and
// error.
func hostRow(h *metal3v1.BareMetalHost) Row {
	r := newRow("BareMetalHost", h)
	r.State = deleting(h, orUnknown(string(h.Status.Provisioning.State)))
	r.Power = "off"
	if h.Status.PoweredOn {
		r.Power = "on"
	}
	if c := h.Spec.ConsumerRef; c != nil {
		r.Detail = "consumer " + c.Kind + " " + c.Name
	}
	if h.Status.ErrorMessage != "" || h.Status.ErrorType != "" {
		r.Failing = strings.TrimPrefix(string(h.Status.ErrorType)+": "+h.Status.ErrorMessage, ": ")
	}
	return r
}

func val(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}
