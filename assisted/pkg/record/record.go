// Package record reads and writes what the agent service keeps in the API:
// a host's record is its Agent, an install's its ClusterDeployment,
// AgentClusterInstall and install-state Secret. The REST server and the
// controllers share these helpers, so both read the same facts the same way.
package record

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/clusterstate"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
)

// ClusterDeploymentIndex indexes Agents by "<namespace>/<name>" of the
// ClusterDeployment spec.clusterDeploymentName names, in the Agent's own
// namespace: an Agent naming another namespace's is in no entry, so that
// it is never one of that cluster's Agents (ErrCrossNamespace).
const ClusterDeploymentIndex = "spec.clusterDeploymentName"

// IndexClusterDeployment is the index function of ClusterDeploymentIndex.
func IndexClusterDeployment(o client.Object) []string {
	a, ok := o.(*agentinstallv1.Agent)
	if !ok {
		return nil
	}
	if name := clusterDeploymentOf(a); name != "" {
		return []string{a.Namespace + "/" + name}
	}
	return nil
}

// Cluster is an install: a ClusterDeployment and its AgentClusterInstall.
type Cluster struct {
	CD  *hivev1.ClusterDeployment
	ACI *hiveextv1.AgentClusterInstall
}

// ID is the cluster's ID in the REST API: its AgentClusterInstall's UID.
func (c *Cluster) ID() string { return string(c.ACI.UID) }

// SNO tells whether the cluster is single-node.
func (c *Cluster) SNO() bool {
	return c.ACI.Spec.ProvisionRequirements.ControlPlaneAgents == 1 && c.ACI.Spec.ProvisionRequirements.WorkerAgents == 0
}

// State is the cluster's status (status.debugInfo.state).
func (c *Cluster) State() string { return c.ACI.Status.DebugInfo.State }

// ForDeployment returns the install of a ClusterDeployment; nil when it
// does not point at an AgentClusterInstall (other kinds are not ours) or
// that is missing.
func ForDeployment(ctx context.Context, r client.Reader, cd *hivev1.ClusterDeployment) (*Cluster, error) {
	ref := cd.Spec.ClusterInstallRef
	if ref == nil || ref.Kind != "AgentClusterInstall" || ref.Group != hiveextv1.GroupVersion.Group {
		return nil, nil
	}
	aci := &hiveextv1.AgentClusterInstall{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: cd.Namespace, Name: ref.Name}, aci); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return &Cluster{CD: cd, ACI: aci}, nil
}

// ForAgent returns the install an Agent is bound to; nil when unbound,
// when bound to another namespace's ClusterDeployment (refused:
// AgentClusterReference says why), or when its ClusterDeployment or
// AgentClusterInstall is missing.
func ForAgent(ctx context.Context, r client.Reader, a *agentinstallv1.Agent) (*Cluster, error) {
	name := clusterDeploymentOf(a)
	if name == "" {
		return nil, nil
	}
	cd := &hivev1.ClusterDeployment{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: name}, cd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return ForDeployment(ctx, r, cd)
}

// Agents returns the Agents bound to a ClusterDeployment, by name: those
// of its namespace (ClusterDeploymentIndex).
func Agents(ctx context.Context, r client.Reader, cd *hivev1.ClusterDeployment) ([]agentinstallv1.Agent, error) {
	l := &agentinstallv1.AgentList{}
	if err := r.List(ctx, l, client.InNamespace(cd.Namespace), client.MatchingFields{ClusterDeploymentIndex: cd.Namespace + "/" + cd.Name}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Role is an Agent's effective role: spec.role unless empty or
// auto-assign, else the suggested status.role.
func Role(a *agentinstallv1.Agent) string {
	if r := a.Spec.Role; r != "" && r != agentinstallv1.HostRoleAutoAssign {
		return string(r)
	}
	if a.Status.Role != "" {
		return string(a.Status.Role)
	}
	return string(agentinstallv1.HostRoleAutoAssign)
}

// Hostname is an Agent's effective hostname.
func Hostname(a *agentinstallv1.Agent) string {
	if a.Spec.Hostname != "" {
		return a.Spec.Hostname
	}
	return a.Status.Inventory.Hostname
}

// What the agent service records of an agent's calls, as annotations of
// its Agent (metadata keys of the service's own: a status field has one
// writer, and the Agent reconciler owns debugInfo.state and the
// conditions that these facts drive; docs/agent-install.md, status
// ownership).
const (
	// LastContactAnnotation is when the agent last called (RFC 3339).
	LastContactAnnotation = "metalshift.io/last-contact"
	// RegisteredAnnotation is when the agent last registered (RFC 3339,
	// nanoseconds): the Agent reconciler applies a registration to the
	// host's state once.
	RegisteredAnnotation = "metalshift.io/registered"
	// RegistrationAppliedAnnotation is the Agent reconciler's: the value of
	// RegisteredAnnotation it applied to debugInfo.state last.
	RegistrationAppliedAnnotation = "metalshift.io/registration-applied"
	// StateSinceAnnotation is the Agent reconciler's: when it last changed
	// status.debugInfo.state (RFC 3339), which the timeout of a host that
	// never starts installing counts from (upstream's status_updated_at).
	StateSinceAnnotation = "metalshift.io/state-since"
	// StageHeldAnnotation is the Agent reconciler's: when it last held
	// the count of the host's stage timeout (RFC 3339; hoststate.Held),
	// which the count starts from again once the hold ends.
	StageHeldAnnotation = "metalshift.io/stage-held"
)

// LastContact is when the agent last contacted the service, as far as the
// Agent says; zero when never: the later of its recorded contact and its
// last progress report (status.progress.stageUpdateTime, which the service
// writes as the agent reports), so that the service need not record a
// contact while the agent reports its install's progress.
func LastContact(a *agentinstallv1.Agent) time.Time {
	t, err := time.Parse(time.RFC3339Nano, a.Annotations[LastContactAnnotation])
	if err != nil {
		t = time.Time{}
	}
	if p := a.Status.Progress.StageUpdateTime; p != nil && p.After(t) {
		return p.Time
	}
	return t
}

// SetLastContact records a contact at now.
func SetLastContact(a *agentinstallv1.Agent, now time.Time) {
	setAnnotation(a, LastContactAnnotation, now.UTC().Format(time.RFC3339Nano))
}

// StateSince is when the host's state last changed; zero when unknown.
func StateSince(a *agentinstallv1.Agent) time.Time {
	t, err := time.Parse(time.RFC3339Nano, a.Annotations[StateSinceAnnotation])
	if err != nil {
		return time.Time{}
	}
	return t
}

// SetStateSince records a change of the host's state at now.
func SetStateSince(a *agentinstallv1.Agent, now time.Time) {
	setAnnotation(a, StateSinceAnnotation, now.UTC().Format(time.RFC3339Nano))
}

// StageHeld is when the count of the host's stage timeout was last held;
// zero when never.
func StageHeld(a *agentinstallv1.Agent) time.Time {
	t, err := time.Parse(time.RFC3339Nano, a.Annotations[StageHeldAnnotation])
	if err != nil {
		return time.Time{}
	}
	return t
}

// SetStageHeld records that the count of the host's stage timeout is held
// at now.
func SetStageHeld(a *agentinstallv1.Agent, now time.Time) {
	setAnnotation(a, StageHeldAnnotation, now.UTC().Format(time.RFC3339Nano))
}

// SetRegistered records a registration at now.
func SetRegistered(a *agentinstallv1.Agent, now time.Time) {
	setAnnotation(a, RegisteredAnnotation, now.UTC().Format(time.RFC3339Nano))
}

// SetRegistrationApplied records that the Agent reconciler applied the
// registration of RegisteredAnnotation's value registration.
func SetRegistrationApplied(a *agentinstallv1.Agent, registration string) {
	setAnnotation(a, RegistrationAppliedAnnotation, registration)
}

// PendingRegistration is the agent's registration the Agent reconciler
// has not applied to the host's state yet, "" when none.
func PendingRegistration(a *agentinstallv1.Agent) string {
	if r := a.Annotations[RegisteredAnnotation]; r != a.Annotations[RegistrationAppliedAnnotation] {
		return r
	}
	return ""
}

// State is the host's state: status.debugInfo.state, or what a pending
// registration makes of it, which the Agent reconciler is about to write
// (the service answers the agent with it at once).
func State(a *agentinstallv1.Agent) string {
	if PendingRegistration(a) == "" {
		return a.Status.DebugInfo.State
	}
	return hoststate.Register(a.Status.DebugInfo.State, a.Spec.ClusterDeploymentName != nil && AgentClusterReference(a) == nil)
}

func setAnnotation(a *agentinstallv1.Agent, k, v string) {
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	a.Annotations[k] = v
}

// Install-state Secret: what the service made when the install started.
const (
	InstallStateSuffix   = "-install-state"
	KeyRootCACert        = "root-ca.crt"
	KeyRootCAKey         = "root-ca.key"
	KeyAdminKubeconfig   = "kubeconfig"
	KeyInstallConfig     = "install-config.yaml"
	KeyKubeadminPassword = "password"
	KeyClusterID         = "cluster-id"
	// AdminKubeconfigSuffix and AdminPasswordSuffix name the outputs:
	// <cd>-admin-kubeconfig (key kubeconfig) and <cd>-admin-password
	// (keys username, password).
	AdminKubeconfigSuffix = "-admin-kubeconfig"
	AdminPasswordSuffix   = "-admin-password"
)

// InstallStateName is the install-state Secret of an install.
func InstallStateName(aci *hiveextv1.AgentClusterInstall) string {
	return aci.Name + InstallStateSuffix
}

// notStarted are the install's states before its install state is
// written (preparing-for-installation writes it).
var notStarted = []string{"", clusterstate.StatusPendingForInput, clusterstate.StatusInsufficient, clusterstate.StatusReady}

// Started tells whether aci's status is past the states before its
// install-state Secret is written.
func Started(aci *hiveextv1.AgentClusterInstall) bool {
	return !slices.Contains(notStarted, aci.Status.DebugInfo.State)
}

// InstallState reads an install's install-state Secret; nil when missing.
func InstallState(ctx context.Context, r client.Reader, aci *hiveextv1.AgentClusterInstall, opts ...client.GetOption) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: aci.Namespace, Name: InstallStateName(aci)}, s, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return s, nil
}

// PullSecret reads a pull secret (key .dockerconfigjson).
func PullSecret(ctx context.Context, r client.Reader, ns string, ref *corev1.LocalObjectReference) ([]byte, error) {
	if ref == nil || ref.Name == "" {
		return nil, fmt.Errorf("no pull secret reference")
	}
	s := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, s); err != nil {
		return nil, err
	}
	data := s.Data[corev1.DockerConfigJsonKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("secret %s/%s has no %s", ns, ref.Name, corev1.DockerConfigJsonKey)
	}
	return data, nil
}

// OpenshiftVersion reads the OpenShift version from a release image's tag,
// e.g. quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64 → 4.16.3.
func OpenshiftVersion(releaseImage string) string {
	i := strings.LastIndex(releaseImage, ":")
	if i < 0 || strings.Contains(releaseImage[i:], "/") {
		return ""
	}
	tag := releaseImage[i+1:]
	if j := strings.Index(tag, "-"); j > 0 {
		tag = tag[:j]
	}
	return tag
}

// MinorVersion is "4.16" of "4.16.3".
func MinorVersion(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// ImageSet reads an install's ClusterImageSet.
func ImageSet(ctx context.Context, r client.Reader, c *Cluster) (*hivev1.ClusterImageSet, error) {
	if c.ACI.Spec.ImageSetRef == nil || c.ACI.Spec.ImageSetRef.Name == "" {
		return nil, fmt.Errorf("the AgentClusterInstall has no imageSetRef")
	}
	is := &hivev1.ClusterImageSet{}
	if err := r.Get(ctx, types.NamespacedName{Name: c.ACI.Spec.ImageSetRef.Name}, is); err != nil {
		return nil, fmt.Errorf("ClusterImageSet %s: %w", c.ACI.Spec.ImageSetRef.Name, err)
	}
	return is, nil
}

// OSImage finds the OS image of an OpenShift version and architecture in
// the AgentServiceConfig "agent".
func OSImage(ctx context.Context, r client.Reader, version, arch string) (assistedapi.OSImage, error) {
	if arch == "" {
		arch = "x86_64"
	}
	asc := &agentinstallv1.AgentServiceConfig{}
	if err := r.Get(ctx, types.NamespacedName{Name: agentinstallv1.AgentServiceConfigName}, asc); err != nil {
		return assistedapi.OSImage{}, fmt.Errorf("AgentServiceConfig %s: %w", agentinstallv1.AgentServiceConfigName, err)
	}
	minor := MinorVersion(version)
	for _, im := range asc.Spec.OSImages {
		a := im.CPUArchitecture
		if a == "" {
			a = "x86_64"
		}
		if a == arch && (im.OpenshiftVersion == minor || im.OpenshiftVersion == version) {
			out := assistedapi.OSImage{URL: im.URL}
			if t, sum, ok := strings.Cut(im.Checksum, ":"); ok {
				out.ChecksumType, out.Checksum = t, sum
			}
			return out, nil
		}
	}
	return assistedapi.OSImage{}, fmt.Errorf("AgentServiceConfig %s has no OS image for OpenShift %s on %s", agentinstallv1.AgentServiceConfigName, minor, arch)
}

// MachineNetworks are an install's machine networks: the ACI's; else for a
// single node, the network of the node's address, and for more nodes the
// network of a host address that holds the API VIP (upstream fills them in
// the same ways).
func MachineNetworks(c *Cluster, agents []agentinstallv1.Agent) []string {
	var out []string
	for _, m := range c.ACI.Spec.Networking.MachineNetwork {
		out = append(out, m.CIDR)
	}
	if len(out) > 0 {
		return out
	}
	vips := append(append([]string(nil), c.ACI.Spec.APIVIPs...), c.ACI.Spec.IngressVIPs...)
	if c.ACI.Spec.APIVIP != "" {
		vips = append(vips, c.ACI.Spec.APIVIP)
	}
	if !c.SNO() && len(vips) == 0 {
		return nil
	}
	for i := range agents {
		if agents[i].Status.Inventory.ReportTime == nil {
			continue
		}
		inv := InventoryFromCR(&agents[i].Status.Inventory)
		if c.SNO() {
			if n := validations.SNOMachineNetwork(inv); n != "" {
				return []string{n}
			}
			continue
		}
		for _, vip := range vips {
			if n := validations.VIPMachineNetwork(inv, vip); n != "" {
				return []string{n}
			}
		}
	}
	return nil
}

// RemoveFinalizer removes finalizer from o with an optimistically locked
// merge patch (a concurrent change makes it fail and the reconcile run
// again); an object already gone is not an error.
func RemoveFinalizer(ctx context.Context, c client.Client, o client.Object, finalizer string) error {
	if !controllerutil.ContainsFinalizer(o, finalizer) {
		return nil
	}
	before, ok := o.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not a client.Object", o)
	}
	controllerutil.RemoveFinalizer(o, finalizer)
	return client.IgnoreNotFound(c.Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}
