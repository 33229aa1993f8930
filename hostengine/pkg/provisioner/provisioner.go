package provisioner

import (
	"context"
	"errors"
	"time"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
)

// Sentinel errors of every driver; match them with errors.Is.
var (
	// ErrCredentials: the BMC refused the credentials. Retrying does not
	// help until the credentials Secret changes.
	ErrCredentials = errors.New("the BMC refused the credentials")
	// ErrUnreachable: the BMC did not answer. Transient.
	ErrUnreachable = errors.New("the BMC did not answer")
	// ErrNotSupported: the driver cannot do this (e.g. out-of-band
	// inspection over IPMI).
	ErrNotSupported = errors.New("not supported by this BMC driver")
	// ErrTaskStuck: a task the BMC started for an operation did not finish
	// in the driver's time limit. The operation starts over when called
	// again.
	ErrTaskStuck = errors.New("the BMC did not finish its task")
	// ErrMedia: the BMC could not attach the deploy image.
	ErrMedia = errors.New("the BMC could not attach the deploy image")
	// ErrAddressRefused: the hub's BMC egress policy refuses the address
	// the BMC's host resolves to (loopback, link-local, ...); the
	// connection was not opened and nothing, credentials least of all, was
	// sent. Retrying does not help until spec.bmc.address, what its name
	// resolves to, or the hub's policy changes.
	ErrAddressRefused = egress.ErrRefused
)

// Credentials to log in to a BMC. Never log them.
type Credentials struct {
	Username string
	Password string
}

// DeployImage is how the deploy agent reaches a host: an ISO for virtual
// media, or an iPXE script for network boot. Both carry the same agent and
// the same per-host, expiring credentials.
type DeployImage struct {
	ISOURL  string
	IPXEURL string
}

// Result says whether an operation that changes the machine is finished.
// Like baremetal-operator's provisioner results, a driver starts work and
// returns: Dirty means the BMC is still at it (a Redfish task is running,
// the power is changing); call the same method again after RequeueAfter,
// which picks up where it stopped. Nothing blocks a reconcile while a BMC
// works.
type Result struct {
	Dirty        bool
	RequeueAfter time.Duration
}

// Done is the Result of a finished operation.
var Done = Result{}

// InProgress is the Result of an operation the BMC is still working on.
func InProgress(after time.Duration) Result { return Result{Dirty: true, RequeueAfter: after} }

// Provisioner acts on one machine through its BMC. Every method is
// idempotent and may be called again after an error or a restart of the
// engine; none waits for the BMC longer than one request.
type Provisioner interface {
	// Register checks that the BMC answers and accepts the credentials.
	// Returns ErrCredentials or ErrUnreachable.
	Register(ctx context.Context) error

	// PowerState reports whether the machine is powered on. May be polled.
	PowerState(ctx context.Context) (on bool, err error)

	// PowerOn and PowerOff change the power state; a machine already in
	// that state is left alone. Dirty until the BMC reports it done.
	PowerOn(ctx context.Context) (Result, error)
	PowerOff(ctx context.Context) (Result, error)

	// Reboot power-cycles the machine (soft: graceful restart when the
	// BMC supports it), powering it on if it is off. Called again while
	// Dirty, it waits for the restart it started rather than starting one.
	Reboot(ctx context.Context, soft bool) (Result, error)

	// Inspect reads the hardware out of band, without booting anything.
	// Returns ErrNotSupported when the BMC cannot.
	Inspect(ctx context.Context) (*metal3v1.HardwareDetails, error)

	// BootDeployImage makes the machine boot the deploy image once (virtual
	// media or PXE, by driver) and restarts it. uefi selects the boot mode.
	// Returns ErrMedia when virtual media cannot be attached.
	BootDeployImage(ctx context.Context, img DeployImage, uefi bool) (Result, error)

	// BootDisk detaches any deploy media, makes the machine boot from its
	// disk, and restarts it when powerOn, else leaves it off.
	BootDisk(ctx context.Context, uefi, powerOn bool) (Result, error)
}

// Factory builds the Provisioner for a BMC address and credentials.
type Factory interface {
	New(address string, insecure bool, creds Credentials) (Provisioner, error)
}

// FactoryFunc adapts a function to Factory.
type FactoryFunc func(address string, insecure bool, creds Credentials) (Provisioner, error)

// New calls f.
func (f FactoryFunc) New(address string, insecure bool, creds Credentials) (Provisioner, error) {
	return f(address, insecure, creds)
}
