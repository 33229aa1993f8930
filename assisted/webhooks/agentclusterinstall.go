package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/clusterstate"
)

// +kubebuilder:webhook:path=/mutate-extensions-hive-openshift-io-v1beta1-agentclusterinstall,mutating=true,failurePolicy=fail,sideEffects=None,groups=extensions.hive.openshift.io,resources=agentclusterinstalls,verbs=create;update,versions=v1beta1,name=default.agentclusterinstall.extensions.hive.openshift.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-extensions-hive-openshift-io-v1beta1-agentclusterinstall,mutating=false,failurePolicy=fail,sideEffects=None,groups=extensions.hive.openshift.io,resources=agentclusterinstalls,verbs=create;update,versions=v1beta1,name=validation.agentclusterinstall.extensions.hive.openshift.io,admissionReviewVersions=v1

// Upstream's refusals of AgentClusterInstalls.
const (
	msgSNOWithoutUMN        = "UserManagedNetworking must be set to true with SNO"
	msgImageSetRefImmutable = "Attempted to change AgentClusterInstall.ImageSetRef which is immutable"
	// msgSpecFrozen is followed by the changed fields, one a line.
	msgSpecFrozen = "Attempted to change AgentClusterInstall.Spec which is immutable after install started, except for ClusterMetadata,IgnitionEndpoint fields. Unsupported change: \n"
)

// The spec fields (Go names) that may change once the install started, and
// the one that may change too once it ended.
var (
	mutableWhileInstalling = []string{"ClusterMetadata", "IgnitionEndpoint"}
	mutableOnceEnded       = "ProvisionRequirements"
)

// The cluster states (status.debugInfo.state) in which the install has
// started, as upstream tells it from the Completed condition (reasons
// InstallationInProgress, InstallationCompleted, InstallationFailed), and
// those in which it has ended (InstallationCompleted, InstallationFailed).
var (
	installStartedStates = []string{
		clusterstate.StatusPreparingForInstallation, clusterstate.StatusInstalling, clusterstate.StatusFinalizing,
		clusterstate.StatusInstallingPendingUserAction, clusterstate.StatusAddingHosts, clusterstate.StatusInstalled,
		clusterstate.StatusError,
	}
	installEndedStates = []string{clusterstate.StatusAddingHosts, clusterstate.StatusInstalled, clusterstate.StatusError}
)

// AgentClusterInstall defaults and validates AgentClusterInstalls on
// create and update.
type AgentClusterInstall struct{}

var (
	_ admission.Defaulter[*hiveextv1.AgentClusterInstall] = &AgentClusterInstall{}
	_ admission.Validator[*hiveextv1.AgentClusterInstall] = &AgentClusterInstall{}
)

// SetupWebhookWithManager registers the defaulting and the validating
// webhook on mgr's webhook server, at the paths of the markers above.
func (w *AgentClusterInstall) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &hiveextv1.AgentClusterInstall{}).WithDefaulter(w).WithValidator(w).Complete()
}

// Default sets spec.networking.userManagedNetworking, when it is unset, to
// DefaultUserManagedNetworking's value, before the install starts and
// unless the object is being deleted.
func (w *AgentClusterInstall) Default(_ context.Context, aci *hiveextv1.AgentClusterInstall) error {
	if aci.Spec.Networking.UserManagedNetworking != nil || installStarted(aci) || !aci.DeletionTimestamp.IsZero() {
		return nil
	}
	if umn, ok := DefaultUserManagedNetworking(&aci.Spec); ok {
		aci.Spec.Networking.UserManagedNetworking = &umn
	}
	return nil
}

// DefaultUserManagedNetworking is upstream's default of
// userManagedNetworking for a topology and a platform: true for platform
// None, and for a single node (one control plane Agent, no worker) without
// a platform; false without a platform otherwise. With another platform it
// goes by the number of control plane Agents: External wants it with one
// or more, BareMetal does without it from two, VSphere and Nutanix take it
// with one. ok is false where upstream sets no default (a single-node
// BareMetal install, which the service refuses, or VSphere and Nutanix
// with two or more).
func DefaultUserManagedNetworking(spec *hiveextv1.AgentClusterInstallSpec) (umn, ok bool) {
	p, masters := spec.PlatformType, spec.ProvisionRequirements.ControlPlaneAgents
	switch {
	case p == hiveextv1.NonePlatformType, p == "" && singleNode(spec):
		return true, true
	case p == "":
		return false, true
	case p == hiveextv1.ExternalPlatformType && masters >= 1:
		return true, true
	case p == hiveextv1.BareMetalPlatformType && masters >= 2:
		return false, true
	case (p == hiveextv1.VSpherePlatformType || p == hiveextv1.NutanixPlatformType) && masters == 1:
		return true, true
	}
	return false, false
}

// ValidateCreate refuses an install naming another namespace
// (ignitionEndpoint.caCertificateReference, mirrorRegistryRef), and a
// single-node install without user-managed networking.
func (w *AgentClusterInstall) ValidateCreate(_ context.Context, aci *hiveextv1.AgentClusterInstall) (admission.Warnings, error) {
	if err := crossNamespace("AgentClusterInstall", aci.Namespace, aciRefs(aci), nil); err != nil {
		return nil, err
	}
	if snoWithoutUMN(aci) {
		return nil, conflict(msgSNOWithoutUMN)
	}
	return nil, nil
}

// ValidateUpdate refuses, in upstream's order: a changed imageSetRef, a
// single-node install without user-managed networking, and once the
// install started, a change of the spec but for its clusterMetadata and
// ignitionEndpoint (and provisionRequirements once the install ended).
// Before those, a reference to another namespace that was not there
// before.
func (w *AgentClusterInstall) ValidateUpdate(_ context.Context, old, aci *hiveextv1.AgentClusterInstall) (admission.Warnings, error) {
	if err := crossNamespace("AgentClusterInstall", aci.Namespace, aciRefs(aci), aciRefs(old)); err != nil {
		return nil, err
	}
	if !equality.Semantic.DeepEqual(old.Spec.ImageSetRef, aci.Spec.ImageSetRef) {
		return nil, badRequest(msgImageSetRefImmutable)
	}
	if snoWithoutUMN(aci) {
		return nil, conflict(msgSNOWithoutUMN)
	}
	if !installStarted(aci) {
		return nil, nil
	}
	mutable := mutableWhileInstalling
	if slices.Contains(installEndedStates, aci.Status.DebugInfo.State) {
		mutable = append(slices.Clip(mutable), mutableOnceEnded)
	}
	if changes := specChanges(&old.Spec, &aci.Spec, mutable); len(changes) > 0 {
		return nil, badRequest(msgSpecFrozen + strings.Join(changes, "\n"))
	}
	return nil, nil
}

// ValidateDelete allows every delete.
func (w *AgentClusterInstall) ValidateDelete(context.Context, *hiveextv1.AgentClusterInstall) (admission.Warnings, error) {
	return nil, nil
}

// installStarted tells whether the service started the install. (Status
// is the stored one: an update of the object does not change it.)
func installStarted(aci *hiveextv1.AgentClusterInstall) bool {
	return slices.Contains(installStartedStates, aci.Status.DebugInfo.State)
}

func singleNode(spec *hiveextv1.AgentClusterInstallSpec) bool {
	return spec.ProvisionRequirements.ControlPlaneAgents == 1 && spec.ProvisionRequirements.WorkerAgents == 0
}

// snoWithoutUMN: a single node with userManagedNetworking set to false
// (unset is left to the default).
func snoWithoutUMN(aci *hiveextv1.AgentClusterInstall) bool {
	umn := aci.Spec.Networking.UserManagedNetworking
	return singleNode(&aci.Spec) && umn != nil && !*umn
}

// specChanges lists the fields of spec that differ from old's, but those
// named (Go names) in mutable, one a line as "\tspec.<field>: (<old> =>
// <new>)" with the values as JSON; nil and empty lists and maps are equal.
// It walks the type's fields, so that a field added to the spec is frozen
// too.
func specChanges(old, spec *hiveextv1.AgentClusterInstallSpec, mutable []string) []string {
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(spec).Elem()
	var changes []string
	for i := range ov.NumField() {
		f := ov.Type().Field(i)
		a, b := ov.Field(i).Interface(), nv.Field(i).Interface()
		if slices.Contains(mutable, f.Name) || equality.Semantic.DeepEqual(a, b) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		changes = append(changes, fmt.Sprintf("\tspec.%s: (%s => %s)", name, asJSON(a), asJSON(b)))
	}
	return changes
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}
