package provisioning

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/metal3"
)

// ClusterOperatorName is the ClusterOperator the operator reports.
const ClusterOperatorName = "baremetal"

// OperatorDisabled is the ClusterOperator condition type, besides the
// usual four, that is True when the operator has nothing to do on the
// cluster's platform.
const OperatorDisabled = "Disabled"

// Reasons of the ClusterOperator's conditions, as upstream names them.
const (
	// ReasonAsExpected: Available on a platform the operator ignores.
	ReasonAsExpected = "AsExpected"
	// ReasonUnsupportedPlatform: the platform allows no provisioning
	// network mode; Disabled is True and nothing is deployed.
	ReasonUnsupportedPlatform = "UnsupportedPlatform"
	// ReasonWaitingForProvisioningCR: there is no Provisioning
	// provisioning-configuration yet.
	ReasonWaitingForProvisioningCR = "WaitingForProvisioningCR"
	// ReasonSyncing: the metal3 Deployment is being applied or rolled out
	// (or another owner still holds it).
	ReasonSyncing = "SyncingResources"
	// ReasonDeployComplete: the metal3 Deployment has rolled out and is
	// available.
	ReasonDeployComplete = "DeployComplete"
	// ReasonInvalidConfiguration: the Provisioning's spec breaks a rule;
	// Degraded says which.
	ReasonInvalidConfiguration = "InvalidConfiguration"
	// ReasonDeployTimedOut: the metal3 Deployment has not rolled out
	// within RolloutTimeout of the operator's last write.
	ReasonDeployTimedOut = "DeployTimedOut"
	// ReasonResourceNotFound: what the operator deployed is gone (the
	// Provisioning is being deleted).
	ReasonResourceNotFound = "ResourceNotFound"
	// Upstream's DeploymentCrashLooping is set nowhere, here as upstream.
)

// ReasonClaimed is the reason of the Event recorded when the operator
// claims the metal3 Deployment the machine-api operator left.
const ReasonClaimed = "ClaimedDeployment"

// Messages of the ClusterOperator's conditions (upstream's words).
const (
	MessageUnsupportedPlatform = "Nothing to do on this Platform"
	MessageOperational         = "Operational"
	MessageWaiting             = "Waiting for Provisioning CR"
	MessageApplying            = "Applying metal3 resources"
	MessageUpgraded            = "Operator upgraded"
	MessageDeployComplete      = "metal3 pod is running"
	MessageInvalid             = "Unable to apply Provisioning CR: invalid configuration"
	MessageTimedOut            = "metal3 deployment rollout taking too long"
	MessageDeleted             = "all Metal3 resources deleted"
	MessageInaccessible        = "metal3 deployment inaccessible"
	// MessageStandingDown is metalshift's: a metal3 Deployment neither
	// the operator's nor the machine-api operator's is left alone until
	// its owner hands it over.
	MessageStandingDown = "metal3 deployment is held by another owner (not the machine-api operator): waiting for it to hand it over with the annotation " + metal3.OwnedAnnotation
)

// report is what a reconcile found, in upstream's terms: a reason, the
// message of the condition it is about, and a progress message.
type report struct {
	reason, message, progress string
}

// conditions returns the ClusterOperator's conditions for rep: upstream's
// defaults (everything False but Upgradeable, no reasons) overlaid as the
// reason asks. Transition times are left to setConditions.
func conditions(rep report) []configv1.ClusterOperatorStatusCondition {
	conds := map[string]configv1.ClusterOperatorStatusCondition{
		configv1.OperatorAvailable:   {Status: metav1.ConditionFalse},
		configv1.OperatorProgressing: {Status: metav1.ConditionFalse},
		configv1.OperatorDegraded:    {Status: metav1.ConditionFalse},
		configv1.OperatorUpgradeable: {Status: metav1.ConditionTrue},
		OperatorDisabled:             {Status: metav1.ConditionFalse},
	}
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		conds[t] = configv1.ClusterOperatorStatusCondition{Status: s, Reason: reason, Message: msg}
	}
	const yes, no = metav1.ConditionTrue, metav1.ConditionFalse
	switch rep.reason {
	case ReasonUnsupportedPlatform:
		set(OperatorDisabled, yes, rep.reason, rep.message)
		set(configv1.OperatorAvailable, yes, ReasonAsExpected, MessageOperational)
	case ReasonSyncing:
		set(configv1.OperatorAvailable, yes, rep.reason, rep.message)
		set(configv1.OperatorProgressing, yes, rep.reason, rep.progress)
	case ReasonDeployComplete, ReasonWaitingForProvisioningCR:
		set(configv1.OperatorAvailable, yes, rep.reason, rep.message)
		set(configv1.OperatorProgressing, no, rep.reason, rep.progress)
	case ReasonInvalidConfiguration, ReasonDeployTimedOut:
		set(configv1.OperatorDegraded, yes, rep.reason, rep.message)
		set(configv1.OperatorAvailable, yes, "", "")
		set(configv1.OperatorProgressing, yes, rep.reason, rep.progress)
	case ReasonResourceNotFound:
		set(configv1.OperatorAvailable, no, "", "")
		set(configv1.OperatorProgressing, yes, rep.reason, rep.progress)
		set(configv1.OperatorDegraded, no, rep.reason, "")
	}
	var out []configv1.ClusterOperatorStatusCondition
	for _, t := range []string{configv1.OperatorAvailable, configv1.OperatorProgressing, configv1.OperatorDegraded, configv1.OperatorUpgradeable, OperatorDisabled} {
		c := conds[t]
		c.Type = t
		out = append(out, c)
	}
	return out
}

// settled tells whether rep is a state the operator has reached at its
// own version: only then does it report that version, as the cluster
// version operator expects of an upgrade.
func settled(rep report) bool {
	switch rep.reason {
	case ReasonUnsupportedPlatform, ReasonWaitingForProvisioningCR, ReasonDeployComplete:
		return true
	}
	return false
}

// setConditions replaces old's conditions by conds, keeping a condition's
// transition time while its status stays, else stamping now.
func setConditions(old []configv1.ClusterOperatorStatusCondition, conds []configv1.ClusterOperatorStatusCondition, now time.Time) []configv1.ClusterOperatorStatusCondition {
	out := make([]configv1.ClusterOperatorStatusCondition, 0, len(conds))
	for _, c := range conds {
		c.LastTransitionTime = metav1.NewTime(now)
		if prev := configv1.FindCondition(old, c.Type); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, c)
	}
	return out
}

// relatedObjects are upstream's: the namespace, the metal3.io resources of
// hosts there, the Provisioning and the operator's ClusterRole.
func relatedObjects() []configv1.ObjectReference {
	refs := []configv1.ObjectReference{{Resource: "namespaces", Name: metal3.Namespace}}
	for _, r := range []string{"baremetalhosts", "hostfirmwaresettings", "firmwareschemas", "preprovisioningimages",
		"bmceventsubscriptions", "hostfirmwarecomponents", "dataimages", "hostupdatepolicies"} {
		refs = append(refs, configv1.ObjectReference{Group: "metal3.io", Resource: r, Namespace: metal3.Namespace})
	}
	return append(refs,
		configv1.ObjectReference{Group: "metal3.io", Resource: "provisioning"},
		configv1.ObjectReference{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "cluster-baremetal-operator"})
}

// clusterOperatorAnnotations are those of upstream's manifest.
var clusterOperatorAnnotations = map[string]string{
	"capability.openshift.io/name":                                "baremetal",
	"include.release.openshift.io/self-managed-high-availability": "true",
	"include.release.openshift.io/single-node-developer":          "true",
}
