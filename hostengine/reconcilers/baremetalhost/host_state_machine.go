package baremetalhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
)

// How often stable states re-read the power state, and how long the engine
// waits for a deploy agent before booting it again.
const (
	powerPollInterval = 60 * time.Second
	agentPollInterval = 5 * time.Second
	agentTimeout      = 30 * time.Minute
	// strandedTokenTimeout is how long the engine waits for the report of
	// an agent whose token was asked for again by another boot.
	strandedTokenTimeout = 2 * time.Minute
	// bootPowerGrace is how long after the engine booted the deploy image
	// a machine found off, whose agent has not claimed the request, is
	// taken for one that will not start: a BMC may report the power on
	// some seconds after it accepted the command (IPMI's power up does
	// not wait).
	bootPowerGrace = 2 * time.Minute
)

// stateHandler runs the work of one state.
type stateHandler func(ctx context.Context, s *hostScope) actionResult

// stateMachine maps every state to its handler. A state missing here is a
// bug and fails loudly.
func (r *Reconciler) stateMachine() map[metal3v1.ProvisioningState]stateHandler {
	return map[metal3v1.ProvisioningState]stateHandler{
		metal3v1.StateNone:                    r.handleNone,
		metal3v1.StateUnmanaged:               r.handleUnmanaged,
		metal3v1.StateRegistering:             r.handleRegistering,
		metal3v1.StateInspecting:              r.handleInspecting,
		metal3v1.StatePreparing:               r.handlePreparing,
		metal3v1.StateAvailable:               r.handleAvailable,
		metal3v1.StateProvisioning:            r.handleProvisioning,
		metal3v1.StateProvisioned:             r.handleProvisioned,
		metal3v1.StateDeprovisioning:          r.handleDeprovisioning,
		metal3v1.StateExternallyProvisioned:   r.handleExternallyProvisioned,
		metal3v1.StatePoweringOffBeforeDelete: r.handlePoweringOffBeforeDelete,
		metal3v1.StateDeleting:                r.handleDeleting,
	}
}

// allowedTransitions lists where each state may go; anything else is a bug.
var allowedTransitions = map[metal3v1.ProvisioningState][]metal3v1.ProvisioningState{
	metal3v1.StateNone:                    {metal3v1.StateUnmanaged, metal3v1.StateRegistering},
	metal3v1.StateUnmanaged:               {metal3v1.StateRegistering},
	metal3v1.StateRegistering:             {metal3v1.StateInspecting, metal3v1.StatePreparing, metal3v1.StateExternallyProvisioned, metal3v1.StateUnmanaged},
	metal3v1.StateInspecting:              {metal3v1.StatePreparing, metal3v1.StateExternallyProvisioned},
	metal3v1.StatePreparing:               {metal3v1.StateAvailable},
	metal3v1.StateAvailable:               {metal3v1.StateProvisioning, metal3v1.StateExternallyProvisioned, metal3v1.StateInspecting},
	metal3v1.StateProvisioning:            {metal3v1.StateProvisioned, metal3v1.StateDeprovisioning},
	metal3v1.StateProvisioned:             {metal3v1.StateDeprovisioning},
	metal3v1.StateDeprovisioning:          {metal3v1.StateAvailable},
	metal3v1.StateExternallyProvisioned:   {metal3v1.StatePreparing},
	metal3v1.StatePoweringOffBeforeDelete: {metal3v1.StateDeleting},
	metal3v1.StateDeleting:                {},
}

// errIllegalTransition is a programming error in a handler.
var errIllegalTransition = errors.New("illegal state transition")

func checkTransition(from, to metal3v1.ProvisioningState) error {
	if to == metal3v1.StatePoweringOffBeforeDelete || to == metal3v1.StateDeleting {
		return nil // deletion may start from anywhere
	}
	for _, ok := range allowedTransitions[from] {
		if ok == to {
			return nil
		}
	}
	return fmt.Errorf("%w: %q → %q", errIllegalTransition, from, to)
}

func (r *Reconciler) handleNone(_ context.Context, s *hostScope) actionResult {
	if s.host.Spec.BMC.Address == "" {
		return complete(metal3v1.StateUnmanaged)
	}
	return complete(metal3v1.StateRegistering)
}

func (r *Reconciler) handleUnmanaged(_ context.Context, s *hostScope) actionResult {
	if s.host.Spec.BMC.Address == "" || s.host.Spec.BMC.CredentialsName == "" {
		s.host.Status.OperationalStatus = metal3v1.OperationalStatusDiscovered
		return wait(0) // the spec changing wakes us
	}
	return complete(metal3v1.StateRegistering)
}

// handleRegistering checks the BMC answers and accepts the credentials.
func (r *Reconciler) handleRegistering(ctx context.Context, s *hostScope) actionResult {
	if s.host.Spec.BMC.Address == "" {
		return complete(metal3v1.StateUnmanaged)
	}
	if res := s.requireProvisioner(); res != nil {
		return res
	}
	if err := s.prov.Register(ctx); err != nil {
		return registrationError(s, err)
	}
	s.markGoodCredentials()
	switch {
	case s.host.Spec.ExternallyProvisioned:
		return complete(metal3v1.StateExternallyProvisioned)
	case s.host.Status.HardwareDetails == nil:
		return complete(metal3v1.StateInspecting)
	}
	return complete(metal3v1.StatePreparing)
}

func registrationError(s *hostScope, err error) actionResult {
	addr := metal3v1.RedactBMCAddress(s.host.Spec.BMC.Address)
	switch {
	case errors.Is(err, provisioner.ErrAddressRefused):
		return failOn(metal3v1.RegistrationError, err, fmt.Sprintf("spec.bmc.address %s is refused, nothing was sent to it: %v", addr, err))
	case errors.Is(err, provisioner.ErrCredentials):
		return failOn(metal3v1.RegistrationError, err, fmt.Sprintf("The BMC at %s refused the credentials in Secret %s: fix username and password there", addr, s.host.Spec.BMC.CredentialsName))
	case errors.Is(err, provisioner.ErrUnreachable):
		return failOn(metal3v1.RegistrationError, err, fmt.Sprintf("The BMC at %s did not answer: check the address and that it is reachable (%v)", addr, err))
	}
	return failOn(metal3v1.RegistrationError, err, fmt.Sprintf("Registering with the BMC at %s failed: %v", addr, err))
}

// handleInspecting reads the hardware out of band, or takes it from the
// hardwaredetails annotation when inspection is disabled.
func (r *Reconciler) handleInspecting(ctx context.Context, s *hostScope) actionResult {
	if s.host.InspectionDisabled() || s.host.Spec.ExternallyProvisioned {
		if res := hardwareFromAnnotation(s); res != nil {
			return res
		}
		return r.afterInspection(s)
	}
	if res := s.requireProvisioner(); res != nil {
		return res
	}
	// A host whose PreprovisioningImage serves an image is inspected by
	// the agent booted from it, as Ironic inspects with the agent of the
	// host's preprovisioning image.
	if url, res := r.providedImage(s); res != nil {
		return res
	} else if url != "" {
		return r.inspectInBand(ctx, s)
	}
	hw, err := s.prov.Inspect(ctx)
	if errors.Is(err, provisioner.ErrNotSupported) {
		if _, ok := s.host.Annotations[metal3v1.HardwareDetailsAnnotation]; ok {
			if res := hardwareFromAnnotation(s); res != nil {
				return res
			}
			return r.afterInspection(s)
		}
		return r.inspectInBand(ctx, s)
	}
	if err != nil {
		return failOn(metal3v1.InspectionError, err, fmt.Sprintf("Inspecting over the BMC failed: %v", err))
	}
	s.host.Status.HardwareDetails = hw
	if s.host.Spec.Architecture == "" && hw.CPU.Arch != "" {
		s.archToSet = hw.CPU.Arch
	}
	return r.afterInspection(s)
}

// inspectInBand boots the agent and takes the hardware details it
// reports, as Ironic inspects hosts whose BMC tells nothing (IPMI).
func (r *Reconciler) inspectInBand(ctx context.Context, s *hostScope) actionResult {
	if res := r.request(s, deployapi.ActionInspect); res != nil {
		return res
	}
	rep := s.host.DeployAgentReport()
	switch {
	case rep != nil && rep.Phase == deployapi.PhaseFailed:
		s.setAgentBooted(false, "InspectFailed", rep.Message)
		s.host.Status.DeployAgent = nil
		return fail(metal3v1.InspectionError, "In-band inspection failed: "+rep.Message)
	case rep == nil || rep.Phase != deployapi.PhaseDone || rep.HardwareDetails == nil:
		return r.bootAgent(ctx, s, metal3v1.InspectionError)
	}
	// Power off before the request is dropped, as after cleaning: an agent
	// still running could otherwise claim the next request (a deploy) in
	// the moment before the engine reboots the host for it.
	res, err := s.prov.BootDisk(ctx, s.uefi(), false)
	if err != nil {
		return failOn(metal3v1.InspectionError, err, fmt.Sprintf("Powering the host off after in-band inspection failed: %v", err))
	}
	if res.Dirty {
		return wait(res.RequeueAfter)
	}
	s.host.Status.PoweredOn = false
	hw := rep.HardwareDetails.DeepCopy()
	s.host.Status.HardwareDetails = hw
	if s.host.Spec.Architecture == "" && hw.CPU.Arch != "" {
		s.archToSet = hw.CPU.Arch
	}
	s.setAgentBooted(false, "Inspected", "The deploy agent reported the hardware")
	s.host.Status.DeployAgent = nil
	return r.afterInspection(s)
}

func (r *Reconciler) afterInspection(s *hostScope) actionResult {
	if s.host.Spec.ExternallyProvisioned {
		return complete(metal3v1.StateExternallyProvisioned)
	}
	return complete(metal3v1.StatePreparing)
}

// hardwareFromAnnotation copies inspect.metal3.io/hardwaredetails to the status.
func hardwareFromAnnotation(s *hostScope) actionResult {
	raw, ok := s.host.Annotations[metal3v1.HardwareDetailsAnnotation]
	if !ok {
		return nil
	}
	hw := &metal3v1.HardwareDetails{}
	if err := json.Unmarshal([]byte(raw), hw); err != nil {
		return failOn(metal3v1.InspectionError, err, fmt.Sprintf("Annotation %s is not valid hardware details JSON: %v", metal3v1.HardwareDetailsAnnotation, err))
	}
	s.host.Status.HardwareDetails = hw
	return nil
}

// handlePreparing applies configuration before the host is offered; there
// is none to apply yet (no RAID or firmware settings), so it passes.
func (r *Reconciler) handlePreparing(_ context.Context, _ *hostScope) actionResult {
	return complete(metal3v1.StateAvailable)
}

func (r *Reconciler) handleAvailable(ctx context.Context, s *hostScope) actionResult {
	if s.host.Spec.ExternallyProvisioned {
		return complete(metal3v1.StateExternallyProvisioned)
	}
	if s.host.WantsProvisioning() && s.host.Spec.Online {
		return complete(metal3v1.StateProvisioning)
	}
	return r.managePower(ctx, s)
}

// handleProvisioning boots the deploy agent, waits for its report, then
// boots the host from its disk.
func (r *Reconciler) handleProvisioning(ctx context.Context, s *hostScope) actionResult {
	if !s.host.WantsProvisioning() {
		return complete(metal3v1.StateDeprovisioning)
	}
	if s.host.Spec.Image == nil || s.host.Spec.Image.URL == "" {
		return r.customDeploy(ctx, s)
	}
	if errs := metal3v1.ValidateSecretNamespaces(s.host); len(errs) > 0 {
		return fail(metal3v1.ProvisioningError, errs.ToAggregate().Error())
	}
	if res := s.requireProvisioner(); res != nil {
		return res
	}
	if s.host.Spec.Image.DiskFormat != nil && *s.host.Spec.Image.DiskFormat == "live-iso" {
		return r.bootLiveISO(ctx, s)
	}
	if res := r.request(s, deployapi.ActionDeploy); res != nil {
		return res
	}
	return r.awaitDeploy(ctx, s)
}

// customDeploy runs spec.customDeploy without an image: the method is the
// image's to provide, so the host boots its PreprovisioningImage (metalshift's
// own deploy image provides none) and its agent runs the method.
func (r *Reconciler) customDeploy(ctx context.Context, s *hostScope) actionResult {
	if res := s.requireProvisioner(); res != nil {
		return res
	}
	url, res := r.providedImage(s)
	if res != nil {
		return res
	}
	if url == "" {
		return fail(metal3v1.ProvisioningError, fmt.Sprintf("customDeploy method %q needs a deploy image that provides it: no provider serves PreprovisioningImage %s, and metalshift's own deploy agent only writes spec.image",
			s.host.Spec.CustomDeploy.Method, s.host.Name))
	}
	if res := r.request(s, deployapi.ActionCustomDeploy); res != nil {
		return res
	}
	return r.awaitDeploy(ctx, s)
}

// awaitDeploy boots the agent for the current deploy or custom deploy
// request and, once it reported the request done, boots the host from its
// disk.
func (r *Reconciler) awaitDeploy(ctx context.Context, s *hostScope) actionResult {
	rep := s.host.DeployAgentReport()
	if rep == nil || rep.Phase == deployapi.PhaseRunning {
		return r.bootAgent(ctx, s, metal3v1.ProvisioningError)
	}
	if rep.Phase == deployapi.PhaseFailed {
		s.setAgentBooted(false, "DeployFailed", rep.Message)
		s.host.Status.DeployAgent = nil
		return fail(metal3v1.ProvisioningError, "The deploy agent failed: "+rep.Message)
	}
	res, err := s.prov.BootDisk(ctx, s.uefi(), s.host.Spec.Online)
	if err != nil {
		return failOn(metal3v1.ProvisioningError, err, fmt.Sprintf("Booting the host from its disk failed: %v", err))
	}
	if res.Dirty {
		return wait(res.RequeueAfter)
	}
	s.host.Status.Provisioning.Image = metal3v1.Image{}
	msg := fmt.Sprintf("The image was written to %s", rep.RootDevice)
	if s.host.Spec.Image != nil {
		s.host.Status.Provisioning.Image = *s.host.Spec.Image
	} else if s.host.Spec.CustomDeploy != nil {
		msg = "The custom deploy method " + s.host.Spec.CustomDeploy.Method + " finished"
	}
	s.host.Status.Provisioning.RootDeviceHints = s.host.Spec.RootDeviceHints.DeepCopy()
	s.host.Status.Provisioning.BootMode = s.host.BootModeOrDefault()
	s.host.Status.Provisioning.CustomDeploy = s.host.Spec.CustomDeploy.DeepCopy()
	s.host.Status.PoweredOn = s.host.Spec.Online
	s.setAgentBooted(false, "Deployed", msg)
	s.host.Status.DeployAgent = nil
	return complete(metal3v1.StateProvisioned)
}

// bootLiveISO provisions a live-iso image: nothing is written to the disk;
// the ISO is attached as virtual media and the host boots it once, and is
// provisioned from then on (what runs there, the agent-based install's
// discovery agent say, takes it from there). Only BMCs with virtual media
// can do it.
func (r *Reconciler) bootLiveISO(ctx context.Context, s *hostScope) actionResult {
	addr, err := provisioner.ParseAddress(s.host.Spec.BMC.Address)
	if err != nil || !addr.VirtualMedia {
		return fail(metal3v1.ProvisioningError, fmt.Sprintf("A live-iso image is booted from virtual media: BMC address %q has none (use a virtual media driver such as redfish-virtualmedia)", metal3v1.RedactBMCAddress(s.host.Spec.BMC.Address)))
	}
	res, err := s.prov.BootDeployImage(ctx, provisioner.DeployImage{ISOURL: s.host.Spec.Image.URL}, s.uefi())
	if err != nil {
		if errors.Is(err, provisioner.ErrMedia) {
			return failOn(metal3v1.ProvisioningError, err, fmt.Sprintf("The BMC could not attach the live ISO: %v", err))
		}
		return failOn(metal3v1.ProvisioningError, err, fmt.Sprintf("Booting the live ISO failed: %v", err))
	}
	if res.Dirty {
		return wait(res.RequeueAfter)
	}
	s.host.Status.Provisioning.Image = *s.host.Spec.Image
	s.host.Status.Provisioning.RootDeviceHints = s.host.Spec.RootDeviceHints.DeepCopy()
	s.host.Status.Provisioning.BootMode = s.host.BootModeOrDefault()
	s.host.Status.Provisioning.CustomDeploy = s.host.Spec.CustomDeploy.DeepCopy()
	s.host.Status.PoweredOn = true
	s.host.Status.DeployAgent = nil
	return complete(metal3v1.StateProvisioned)
}

// request makes sure the host's status holds a deploy agent request for
// action (and, to deploy, for spec.image), making a new one when it does
// not. A new request is written to the API before the agent is booted for
// it, so that whichever engine replica goes on finds it: with the start
// of its boot (bootAgent), in one status patch.
func (r *Reconciler) request(s *hostScope, action string) actionResult {
	req := s.host.DeployAgentRequest()
	if req != nil && req.Action == action && (action != deployapi.ActionDeploy || equality.Semantic.DeepEqual(req.Image, s.host.Spec.Image)) &&
		(action != deployapi.ActionCustomDeploy || equality.Semantic.DeepEqual(req.CustomDeploy, s.host.Spec.CustomDeploy)) {
		return nil
	}
	now := r.Clock.Now()
	req = &metal3v1.DeployAgentRequest{Action: action}
	parts := []string{string(s.host.UID), action, now.UTC().Format(time.RFC3339Nano)}
	if action == deployapi.ActionDeploy {
		req.Image = s.host.Spec.Image.DeepCopy()
		parts = append(parts, req.Image.URL, req.Image.Checksum)
	}
	if action == deployapi.ActionCustomDeploy {
		req.CustomDeploy = s.host.Spec.CustomDeploy.DeepCopy()
		parts = append(parts, req.CustomDeploy.Method)
	}
	req.Generation = deployapi.Fingerprint(parts...)
	s.host.Status.DeployAgent = &metal3v1.DeployAgentStatus{Request: req}
	return nil
}

// bootAgent boots the deploy image for the current request unless it was
// booted for it already or its agent has claimed it, and waits for reports.
func (r *Reconciler) bootAgent(ctx context.Context, s *hostScope, errType metal3v1.ErrorType) actionResult {
	req := s.host.DeployAgentRequest()
	rep := s.host.DeployAgentReport()
	switch {
	case rep != nil:
		// The agent runs: never boot it again for this request, or the
		// disk could be written twice. A custom deploy takes what its
		// method takes (an agent-based install waits for the cluster's
		// other hosts and its user): it has no timeout.
		if res := r.checkAgentPower(ctx, s, errType, "it claimed the request"); res != nil {
			return res
		}
		if r.Clock.Since(rep.Time.Time) < agentTimeout || req.Action == deployapi.ActionCustomDeploy {
			return wait(agentPollInterval)
		}
		return r.agentTimedOut(s, errType, fmt.Sprintf("The deploy agent did not finish within %s of its last report: check the host's console", agentTimeout))
	case stranded(s.host, r.Clock.Now()):
		// Another boot asked for the token after it was handed out, and
		// the boot that has it never reported: the token went to a boot
		// that is gone (the machine was booted again under it), or to
		// someone else. A new request gets a new ticket and a new boot.
		tok := s.host.DeployAgentToken()
		return r.agentTimedOut(s, errType, fmt.Sprintf("The deploy agent token of request %s went to %s, which did not report within %s; a second boot asked for it from %s: booting the deploy agent again for a new request",
			req.Generation, tok.Source, strandedTokenTimeout, tok.LastRefusalSource))
	case req.BootedAt != nil:
		if r.Clock.Since(req.BootedAt.Time) >= bootPowerGrace {
			if res := r.checkAgentPower(ctx, s, errType, fmt.Sprintf("it was booted at %s", req.BootedAt.UTC().Format(time.RFC3339))); res != nil {
				return res
			}
		}
		if r.Clock.Since(req.BootedAt.Time) < agentTimeout {
			return wait(agentPollInterval)
		}
		return r.agentTimedOut(s, errType, fmt.Sprintf("The deploy agent did not report within %s: check that the host can reach the engine", agentTimeout))
	case req.BootStartedAt != nil && s.host.DeployAgentToken() != nil:
		// The deploy image booted and its agent has the request's token:
		// a replica that died before it recorded the boot (or this one,
		// while the BMC's last task was finishing) booted it. Booting it
		// again would start a second agent the request refuses.
		now := metav1.NewTime(r.Clock.Now().Truncate(time.Second))
		req.BootedAt = &now
		s.host.Status.PoweredOn = true
		s.setAgentBooted(true, "Booted", fmt.Sprintf("The deploy image was booted to %s", req.Action))
		return wait(agentPollInterval)
	}
	img, own, wres := r.bootImage(s)
	if wres != nil {
		return wres
	}
	if res := r.checkBootMAC(ctx, s, errType); res != nil {
		return res
	}
	if own {
		if err := r.Deploy.CheckBootConfig(ctx, s.host); err != nil {
			return failOn(errType, err, fmt.Sprintf("The deploy image cannot be made for this host: %v", err))
		}
		img = r.Deploy.DeployImage(s.host)
	}
	if req.BootStartedAt == nil {
		// Written before the host is powered on: the deploy server hands a
		// network-booting machine its boot script, and a looked-up machine
		// its ticket, only from then on.
		now := metav1.NewTime(r.Clock.Now().Truncate(time.Second))
		req.BootStartedAt = &now
		return wait(time.Millisecond)
	}
	res, err := s.prov.BootDeployImage(ctx, img, s.uefi())
	if err != nil {
		req.BootStartedAt = nil
		if errors.Is(err, provisioner.ErrMedia) {
			return failOn(errType, err, fmt.Sprintf("The BMC could not attach the deploy image: %v", err))
		}
		return failOn(errType, err, fmt.Sprintf("Booting the deploy image failed: %v", err))
	}
	if res.Dirty {
		return wait(res.RequeueAfter)
	}
	now := metav1.NewTime(r.Clock.Now().Truncate(time.Second))
	req.BootedAt = &now
	s.host.Status.PoweredOn = true
	s.setAgentBooted(true, "Booted", fmt.Sprintf("The deploy image was booted to %s", req.Action))
	return wait(agentPollInterval)
}

// agentTimedOut drops the request, so that the next attempt is a new one.
func (r *Reconciler) agentTimedOut(s *hostScope, errType metal3v1.ErrorType, msg string) actionResult {
	s.setAgentBooted(false, "AgentTimeout", "The deploy agent did not report in time; booting it again")
	s.host.Status.DeployAgent = nil
	return fail(errType, msg)
}

// checkAgentPower reads the machine's power while the agent of the
// current request should be running on it (it claimed the request, or it
// was booted for it bootPowerGrace ago): a machine that is off runs no
// agent (it lost its power, or someone turned it off), and the request
// would otherwise wait for agentTimeout. The request is lost: it is
// dropped, which the host's error and a DeployAgentLost Event say, and the
// next pass makes a new one, whose agent writes the whole image again
// (the old request's token dies with it, so nothing of the old boot can
// write under the new request). A custom deploy is left alone: its method
// owns the machine, and may power it off or restart it. nil means the
// agent may still be running; a failed read is taken as that too (the
// next poll reads again; the report timeout still holds).
func (r *Reconciler) checkAgentPower(ctx context.Context, s *hostScope, errType metal3v1.ErrorType, how string) actionResult {
	req := s.host.DeployAgentRequest()
	if req.Action == deployapi.ActionCustomDeploy {
		return nil
	}
	on, err := s.prov.PowerState(ctx)
	if err != nil || on {
		return nil
	}
	s.host.Status.PoweredOn = false
	msg := fmt.Sprintf("The host is powered off while the deploy agent of request %s should be running (%s): the agent is lost (a power loss, or the host was turned off); %s again from the start for a new request",
		req.Generation, how, agentVerb(req.Action))
	s.event(corev1.EventTypeWarning, "DeployAgentLost", "DeployAgent", "%s", msg)
	s.setAgentBooted(false, "AgentLost", msg)
	s.host.Status.DeployAgent = nil
	return fail(errType, msg)
}

// agentVerb says what a new request for action will do, for messages.
func agentVerb(action string) string {
	switch action {
	case deployapi.ActionDeploy:
		return "writing the image"
	case deployapi.ActionClean:
		return "cleaning the disks"
	case deployapi.ActionInspect:
		return "inspecting the host"
	}
	return "running " + action
}

// stranded reports whether the host's current request is stuck on a token
// nobody uses: handed out at least strandedTokenTimeout ago, asked for
// again since, and no report of the boot that has it (an agent reports
// within a poll of getting its token).
func stranded(host *metal3v1.BareMetalHost, now time.Time) bool {
	tok := host.DeployAgentToken()
	return tok != nil && tok.Refusals > 0 && host.DeployAgentReport() == nil && now.Sub(tok.IssuedAt.Time) >= strandedTokenTimeout
}

func (r *Reconciler) handleProvisioned(ctx context.Context, s *hostScope) actionResult {
	if !s.host.WantsProvisioning() || !s.host.ProvisionedMatchesSpec() {
		return complete(metal3v1.StateDeprovisioning)
	}
	return r.managePower(ctx, s)
}

// handleDeprovisioning cleans disk metadata through the agent (unless
// automated cleaning is disabled), then powers the host off.
func (r *Reconciler) handleDeprovisioning(ctx context.Context, s *hostScope) actionResult {
	if res := s.requireProvisioner(); res != nil {
		return res
	}
	if s.host.Spec.AutomatedCleaningMode != metal3v1.CleaningModeDisabled {
		if res := r.request(s, deployapi.ActionClean); res != nil {
			return res
		}
		rep := s.host.DeployAgentReport()
		switch {
		case rep != nil && rep.Phase == deployapi.PhaseFailed:
			s.setAgentBooted(false, "CleanFailed", rep.Message)
			s.host.Status.DeployAgent = nil
			return fail(metal3v1.ProvisioningError, "Cleaning the disks failed: "+rep.Message)
		case rep == nil || rep.Phase != deployapi.PhaseDone:
			return r.bootAgent(ctx, s, metal3v1.ProvisioningError)
		}
	}
	res, err := s.prov.BootDisk(ctx, s.uefi(), false)
	if err != nil {
		return failOn(metal3v1.ProvisioningError, err, fmt.Sprintf("Powering the host off after deprovisioning failed: %v", err))
	}
	if res.Dirty {
		return wait(res.RequeueAfter)
	}
	s.host.Status.DeployAgent = nil
	s.host.Status.PoweredOn = false
	s.host.Status.Provisioning.Image = metal3v1.Image{}
	s.host.Status.Provisioning.CustomDeploy = nil
	s.host.Status.Provisioning.RootDeviceHints = nil
	s.setAgentBooted(false, "Deprovisioned", "The host was deprovisioned")
	return complete(metal3v1.StateAvailable)
}

func (r *Reconciler) handleExternallyProvisioned(ctx context.Context, s *hostScope) actionResult {
	if !s.host.Spec.ExternallyProvisioned {
		return complete(metal3v1.StatePreparing)
	}
	return r.managePower(ctx, s)
}

func (r *Reconciler) handlePoweringOffBeforeDelete(ctx context.Context, s *hostScope) actionResult {
	if s.prov == nil {
		// Without working credentials the host cannot be powered off; it is
		// released as it is.
		return complete(metal3v1.StateDeleting)
	}
	res, err := s.prov.PowerOff(ctx)
	if err != nil {
		if errors.Is(err, provisioner.ErrCredentials) {
			return complete(metal3v1.StateDeleting)
		}
		return failOn(metal3v1.PowerManagementError, err, fmt.Sprintf("Powering off before delete failed: %v", err))
	}
	if res.Dirty {
		return wait(res.RequeueAfter)
	}
	s.host.Status.PoweredOn = false
	return complete(metal3v1.StateDeleting)
}

func (r *Reconciler) handleDeleting(_ context.Context, s *hostScope) actionResult {
	s.host.Status.DeployAgent = nil
	s.removeFinalizer = true
	return wait(0)
}

// managePower handles reboot requests and keeps the power as spec.online
// says, correcting drift.
func (r *Reconciler) managePower(ctx context.Context, s *hostScope) actionResult {
	if res := s.requireProvisioner(); res != nil {
		return res
	}
	if keys := rebootAnnotations(s.host); len(keys) > 0 {
		res, err := s.prov.Reboot(ctx, rebootSoft(s.host, keys))
		if err != nil {
			return failOn(metal3v1.PowerManagementError, err, fmt.Sprintf("Rebooting failed: %v", err))
		}
		if res.Dirty {
			return wait(res.RequeueAfter) // the annotations stay until the reboot is done
		}
		s.removeAnnotations = keys
		s.host.Status.PoweredOn = true
		s.event(corev1.EventTypeNormal, "Rebooted", "Reboot", "The host was rebooted as requested by %s", strings.Join(keys, ", "))
		if !s.host.Spec.Online {
			return wait(time.Second) // power it off again below on the next pass
		}
		return wait(r.PowerPollInterval)
	}
	on, err := s.prov.PowerState(ctx)
	if err != nil {
		return failOn(metal3v1.PowerManagementError, err, fmt.Sprintf("Reading the power state failed: %v", err))
	}
	s.host.Status.PoweredOn = on
	if on == s.host.Spec.Online {
		return wait(r.PowerPollInterval)
	}
	var res provisioner.Result
	if s.host.Spec.Online {
		res, err = s.prov.PowerOn(ctx)
	} else {
		res, err = s.prov.PowerOff(ctx)
	}
	if err != nil {
		return failOn(metal3v1.PowerManagementError, err, fmt.Sprintf("Changing the power to online=%t failed: %v", s.host.Spec.Online, err))
	}
	if res.Dirty {
		return wait(res.RequeueAfter)
	}
	s.event(corev1.EventTypeNormal, "PowerChanged", "Power", "Powered the host %s to match spec.online", map[bool]string{true: "on", false: "off"}[s.host.Spec.Online])
	s.host.Status.PoweredOn = s.host.Spec.Online
	return wait(r.PowerPollInterval)
}

// rebootAnnotations returns the reboot.metal3.io annotations on host.
func rebootAnnotations(host *metal3v1.BareMetalHost) []string {
	var keys []string
	for k := range host.Annotations {
		if k == metal3v1.RebootAnnotationPrefix || strings.HasPrefix(k, metal3v1.RebootAnnotationPrefix+"/") {
			keys = append(keys, k)
		}
	}
	return keys
}

// rebootSoft is true when every reboot annotation asks for a soft reboot.
func rebootSoft(host *metal3v1.BareMetalHost, keys []string) bool {
	for _, k := range keys {
		var args struct{ Mode string }
		if json.Unmarshal([]byte(host.Annotations[k]), &args) != nil || args.Mode != "soft" {
			return false
		}
	}
	return true
}

// operationFor returns the history entry a state belongs to.
func operationFor(h *metal3v1.OperationHistory, state metal3v1.ProvisioningState) *metal3v1.OperationMetric {
	switch state {
	case metal3v1.StateRegistering:
		return &h.Register
	case metal3v1.StateInspecting:
		return &h.Inspect
	case metal3v1.StateProvisioning:
		return &h.Provision
	case metal3v1.StateDeprovisioning:
		return &h.Deprovision
	}
	return nil
}

// recordTransition updates the operation history when leaving from and
// entering to.
func recordTransition(h *metal3v1.OperationHistory, from, to metal3v1.ProvisioningState, now metav1.Time) {
	if op := operationFor(h, from); op != nil {
		op.End = now
	}
	if op := operationFor(h, to); op != nil {
		*op = metal3v1.OperationMetric{Start: now}
	}
}
