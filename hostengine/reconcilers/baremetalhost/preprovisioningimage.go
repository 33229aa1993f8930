package baremetalhost

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	"github.com/metalshift/metalshift/internal/shard"
)

// Every host has a PreprovisioningImage of its name, which the engine
// creates and owns. A provider (the agent-based install's, say) may claim
// it by giving it a Ready condition: True with status.imageUrl (format
// iso) makes the engine boot that ISO instead of its own deploy image, for
// in-band inspection, custom deploys, deploys and cleaning; False makes
// it wait. Without a Ready condition the engine boots its own image.
//
// A provider needs a moment to claim a new image. Hosts that carry a
// label of a known provider (providerLabels) wait for the claim up to
// providerClaimWait after the image was created before the engine boots
// its own image; other hosts do not wait at all, so the claim costs them
// nothing.
var providerLabels = []string{
	// The agent-based install: hosts labelled for an InfraEnv.
	"infraenvs.agent-install.openshift.io",
}

// providerClaimWait is how long a labelled host waits for a provider.
const providerClaimWait = time.Minute

// ReasonWaitingForImage is the DeployAgentBooted reason while the engine
// waits for the host's PreprovisioningImage.
const ReasonWaitingForImage = "WaitingForPreprovisioningImage"

// ensurePreprovisioningImage creates the host's PreprovisioningImage, or
// keeps its spec in line with the host's, and puts it in the scope.
func (r *Reconciler) ensurePreprovisioningImage(ctx context.Context, s *hostScope) error {
	host := s.host
	want := metal3v1.PreprovisioningImageSpec{
		NetworkDataName: host.Spec.PreprovisioningNetworkDataName,
		Architecture:    host.Spec.Architecture,
		AcceptFormats:   []metal3v1.ImageFormat{metal3v1.ImageFormatISO},
	}
	if s.archToSet != "" {
		want.Architecture = s.archToSet
	}
	ppi := &metal3v1.PreprovisioningImage{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(host), ppi)
	if apierrors.IsNotFound(err) {
		ppi = &metal3v1.PreprovisioningImage{ObjectMeta: metav1.ObjectMeta{Namespace: host.Namespace, Name: host.Name}, Spec: want}
		shard.Propagate(host, ppi) // served by the host's manager
		if err := controllerutil.SetControllerReference(host, ppi, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, ppi); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PreprovisioningImage %s: %w", host.Name, err)
		}
		s.ppi = ppi
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(ppi, host) {
		// Someone else's object of that name: leave it, boot our own image.
		return nil
	}
	s.ppi = ppi
	if ppi.Spec.NetworkDataName != want.NetworkDataName || ppi.Spec.Architecture != want.Architecture || len(ppi.Spec.AcceptFormats) == 0 ||
		ppi.Labels[shard.Label] != host.Labels[shard.Label] {
		// A merge patch of the spec and the shard label (the host's), which
		// the engine alone writes (the provider writes the status): no other
		// writer's change makes it conflict, and none is undone.
		ppi = ppi.DeepCopy()
		before := ppi.DeepCopy()
		ppi.Spec = want
		shard.Propagate(host, ppi)
		if err := r.Client.Patch(ctx, ppi, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("updating PreprovisioningImage %s: %w", host.Name, err)
		}
	}
	return nil
}

// bootImage is what the engine boots for the deploy agent: the host's
// PreprovisioningImage when a provider serves one, else its own deploy
// image (own is true). A result other than nil means: wait, or fail.
func (r *Reconciler) bootImage(s *hostScope) (img provisioner.DeployImage, own bool, res actionResult) {
	url, res := r.providedImage(s)
	if res != nil || url == "" {
		return provisioner.DeployImage{}, url == "" && res == nil, res
	}
	addr, err := provisioner.ParseAddress(s.host.Spec.BMC.Address)
	if err != nil || !addr.VirtualMedia {
		return img, false, fail(metal3v1.ProvisioningError, fmt.Sprintf("PreprovisioningImage %s is an ISO, which is booted from virtual media: BMC address %q has none (use a virtual media driver such as redfish-virtualmedia)",
			s.host.Name, metal3v1.RedactBMCAddress(s.host.Spec.BMC.Address)))
	}
	return provisioner.DeployImage{ISOURL: url}, false, nil
}

// providedImage is the ISO the host's PreprovisioningImage serves, "" when
// no provider serves one; a result when the engine must wait for it.
func (r *Reconciler) providedImage(s *hostScope) (string, actionResult) {
	ppi := s.ppi
	if ppi == nil {
		return "", nil
	}
	ready := meta.FindStatusCondition(ppi.Status.Conditions, metal3v1.ImageReadyCondition)
	switch {
	case ready == nil && hasProviderLabel(s.host) && r.Clock.Since(ppi.CreationTimestamp.Time) < providerClaimWait:
		s.setAgentBooted(false, ReasonWaitingForImage, fmt.Sprintf("Waiting for a provider of PreprovisioningImage %s (the host is labelled for one)", ppi.Name))
		return "", wait(2 * time.Second)
	case ready == nil:
		return "", nil
	case ready.Status != metav1.ConditionTrue:
		s.setAgentBooted(false, ReasonWaitingForImage, fmt.Sprintf("Waiting for PreprovisioningImage %s: %s: %s", ppi.Name, ready.Reason, ready.Message))
		return "", wait(10 * time.Second) // its change wakes the host
	}
	url := ppi.ReadyISOURL()
	if url == "" {
		return "", fail(metal3v1.ProvisioningError, fmt.Sprintf("PreprovisioningImage %s is Ready but serves no ISO (format %q): the engine boots ISO images only", ppi.Name, ppi.Status.Format))
	}
	return url, nil
}

func hasProviderLabel(host *metal3v1.BareMetalHost) bool {
	for _, l := range providerLabels {
		if _, ok := host.Labels[l]; ok {
			return true
		}
	}
	return false
}
