package console

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/api/assistedcommon"
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
	// Hardware summarizes what inspection found on a BareMetalHost
	// (CPUs, memory, disks, NICs), or an Agent's inventory.
	Hardware string `json:"hardware,omitempty"`

	// Of an Agent: its host name, role, ClusterDeployment, InfraEnv and
	// installation stage (Progress is its installation percentage).
	Host     string `json:"host,omitempty"`
	Role     string `json:"role,omitempty"`
	Cluster  string `json:"cluster,omitempty"`
	InfraEnv string `json:"infraEnv,omitempty"`
	Stage    string `json:"stage,omitempty"`
	// Validations are an Agent's or an install's failing validations,
	// "id: message".
	Validations []string `json:"validations,omitempty"`
	// Conditions are a Cluster API Cluster's conditions, "Type=Status
	// (Reason): message".
	Conditions []string `json:"conditions,omitempty"`
	// Of a Machine: its node and whether it is ready.
	Node  string `json:"node,omitempty"`
	Ready string `json:"ready,omitempty"`
	// Of an Event: its reason, the object it is about (Kind/name) and
	// when it last happened (RFC 3339); State is its type, Detail its
	// message.
	Reason   string `json:"reason,omitempty"`
	Involved string `json:"involved,omitempty"`
	Time     string `json:"time,omitempty"`
	// Of an InfraEnv: its discovery ISO's and iPXE script's URLs and the
	// selector of its NMStateConfigs.
	ISO      string                `json:"iso,omitempty"`
	IPXE     string                `json:"ipxe,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Labels are an NMStateConfig's labels.
	Labels map[string]string `json:"labels,omitempty"`
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
	r.Cluster = a.Spec.ClusterDeploymentRef.Name
	r.Validations = failingValidations(a.Status.ValidationsInfo)
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
	r.Host, r.Role, r.InfraEnv = host, string(a.Spec.Role), a.Labels[agentinstallv1.InfraEnvNameLabel]
	r.Stage, r.Progress = a.Status.Progress.CurrentStage, int(a.Status.Progress.InstallationPercentage)
	r.Validations = failingValidations(a.Status.ValidationsInfo)
	if inv := a.Status.Inventory; inv.ReportTime != nil {
		var disk int64
		for _, d := range inv.Disks {
			disk += d.SizeBytes
		}
		r.Hardware = hardware(int(inv.Cpu.Count), inv.Memory.PhysicalBytes, len(inv.Disks), disk, len(inv.Interfaces))
	}
	if inv := a.Status.Inventory; inv.ReportTime != nil {
		var disk int64
		for _, d := range inv.Disks {
			disk += d.SizeBytes
		}
		r.Hardware = hardware(int(inv.Cpu.Count), inv.Memory.PhysicalBytes, len(inv.Disks), disk, len(inv.Interfaces))
	}
	var parts []string
	if host != "" {
		parts = append(parts, "host "+host)
	}
	if ref := a.Spec.ClusterDeploymentName; ref != nil {
		parts = append(parts, "cluster "+ref.Name)
		r.Cluster = ref.Name
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
	if hw := h.Status.HardwareDetails; hw != nil {
		var disk int64
		for _, d := range hw.Storage {
			disk += int64(d.SizeBytes)
		}
		r.Hardware = hardware(hw.CPU.Count, int64(hw.RAMMebibytes)<<20, len(hw.Storage), disk, len(hw.NIC))
	}
	return r
}

// hardware is a host's hardware in a few words: "8 CPUs, 16 GiB, 1 disk
// (120 GiB), 2 NICs".
func hardware(cpus int, ram int64, disks int, diskBytes int64, nics int) string {
	plural := func(n int, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.Itoa(n) + " " + one + "s"
	}
	gib := func(b int64) string { return strconv.FormatInt((b+1<<29)>>30, 10) + " GiB" }
	return fmt.Sprintf("%s, %s, %s (%s), %s", plural(cpus, "CPU"), gib(ram), plural(disks, "disk"), gib(diskBytes), plural(nics, "NIC"))
}

// failingValidations are the validations whose status is "failure", as
// "id: message", in a stable order.
func failingValidations(v assistedcommon.ValidationsStatus) []string {
	var out []string
	for _, results := range v {
		for _, res := range results {
			if res.Status == "failure" {
				out = append(out, res.ID+": "+res.Message)
			}
		}
	}
	slices.Sort(out)
	return out
}

// clusterPageRow is a Cluster on its own page: its row and all its
// conditions.
func clusterPageRow(c *clusterv1.Cluster) Row {
	r := clusterRow(c)
	for _, cond := range c.Status.Conditions {
		r.Conditions = append(r.Conditions, conditionText(cond.Type+"="+string(cond.Status), cond.Reason, cond.Message))
	}
	return r
}

// machineRow shows a Machine: its phase, node and readiness.
func machineRow(m *clusterv1.Machine) Row {
	r := newRow("Machine", m)
	r.State = deleting(m, orUnknown(m.Status.Phase))
	r.Cluster, r.Node, r.Ready = m.Spec.ClusterName, m.Status.NodeRef.Name, "Unknown"
	for _, c := range m.Status.Conditions {
		if c.Type == clusterv1.MachineReadyCondition {
			r.Ready = string(c.Status)
		}
	}
	return r
}

// eventRow shows an Event: its type, reason, object, message and time.
func eventRow(e *corev1.Event) Row {
	r := newRow("Event", e)
	r.State, r.Reason, r.Detail = e.Type, e.Reason, e.Message
	r.Involved = e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
	t := e.LastTimestamp.Time
	switch {
	case !e.EventTime.IsZero() && t.IsZero():
		t = e.EventTime.Time
	case t.IsZero():
		t = e.CreationTimestamp.Time
	}
	r.Time = t.UTC().Format(time.RFC3339)
	return r
}

// infraEnvRow shows an InfraEnv: where to boot its discovery image from.
func infraEnvRow(ie *agentinstallv1.InfraEnv) Row {
	r := newRow("InfraEnv", ie)
	r.State = "Image not ready"
	if ie.Status.ISODownloadURL != "" {
		r.State = "Image ready"
	}
	r.State = deleting(ie, r.State)
	r.ISO, r.IPXE = ie.Status.ISODownloadURL, ie.Status.BootArtifacts.IpxeScriptURL
	r.Selector = ie.Spec.NMStateConfigLabelSelector.DeepCopy()
	return r
}

// nmStateRow shows an NMStateConfig with its labels, which InfraEnvs select.
func nmStateRow(n *agentinstallv1.NMStateConfig) Row {
	r := newRow("NMStateConfig", n)
	r.Labels = n.Labels
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
