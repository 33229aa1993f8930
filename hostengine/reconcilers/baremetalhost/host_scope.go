package baremetalhost

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"sigs.k8s.io/cluster-api/util/conditions"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
)

// DeployAgentBootedCondition is metalshift's own condition on a
// BareMetalHost: True while the deploy agent is booted. It is for people;
// the engine acts on status.deployAgent.
const DeployAgentBootedCondition = "DeployAgentBooted"

// hostScope is what a state handler works with, filled by Reconcile.
type hostScope struct {
	// host is the object being reconciled; handlers change its status.
	host *metal3v1.BareMetalHost
	// prov drives the host's BMC; nil when it could not be built, and
	// provErr then says why.
	prov    provisioner.Provisioner
	provErr actionResult
	// ppi is the host's PreprovisioningImage; nil when there is none.
	ppi *metal3v1.PreprovisioningImage
	// creds is the credentials Secret, when it was read.
	creds *corev1.Secret

	// changed is the state change of this reconcile, if any (one at most:
	// each state is a status write of its own); its metric is recorded
	// once the status holding it is written.
	changed *transition

	recorder events.EventRecorder
	now      func() time.Time

	// Changes outside the status that Reconcile applies after the handler.
	removeFinalizer   bool
	removeAnnotations []string
	archToSet         string
}

// transition is one change of a host's provisioning state.
type transition struct{ from, to metal3v1.ProvisioningState }

func (s *hostScope) requireProvisioner() actionResult {
	if s.prov == nil {
		return s.provErr
	}
	return nil
}

func (s *hostScope) uefi() bool { return s.host.BootModeOrDefault() != metal3v1.Legacy }

// useCredentials records the Secret the driver uses as the tried credentials.
func (s *hostScope) useCredentials(sec *corev1.Secret) {
	s.creds = sec
	s.host.Status.TriedCredentials = metal3v1.CredentialsStatus{
		Reference: &corev1.SecretReference{Name: sec.Name, Namespace: sec.Namespace}, Version: sec.ResourceVersion,
	}
}

func (s *hostScope) markGoodCredentials() {
	if s.creds == nil {
		return
	}
	s.host.Status.GoodCredentials = metal3v1.CredentialsStatus{
		Reference: &corev1.SecretReference{Name: s.creds.Name, Namespace: s.creds.Namespace},
		Version:   s.creds.ResourceVersion,
	}
}

// setAgentBooted records whether the deploy agent is booted and for which request.
func (s *hostScope) setAgentBooted(booted bool, reason, msg string) {
	status := metav1.ConditionFalse
	if booted {
		status = metav1.ConditionTrue
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	conditions.Set(s.host, metav1.Condition{Type: DeployAgentBootedCondition, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now().Truncate(time.Second))})
}

// stateChangedEvent records the StateChanged Event of this reconcile's
// state change, which its status write stores: one Event a write.
func (s *hostScope) stateChangedEvent() {
	if s.changed == nil {
		return
	}
	s.event(corev1.EventTypeNormal, "StateChanged", "Reconcile", "Host went from %q to %q", displayState(s.changed.from), s.changed.to)
}

func (s *hostScope) event(eventType, reason, action, format string, args ...any) {
	if s.recorder != nil {
		s.recorder.Eventf(s.host, nil, eventType, reason, action, format, args...)
	}
}
