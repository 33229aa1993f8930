package baremetalhost

import (
	"errors"
	"time"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
)

// actionResult is what a state handler decided.
type actionResult interface{ isActionResult() }

// actionComplete: the state's work is done; move to next.
type actionComplete struct{ next metal3v1.ProvisioningState }

// actionWait: nothing to do until something changes; look again after.
type actionWait struct{ after time.Duration }

// actionError: the step failed; record it, back off, retry.
type actionError struct {
	errType metal3v1.ErrorType
	msg     string
	// bmc is the BMCReachable condition's reason when the BMC caused the
	// failure, "" otherwise.
	bmc string
}

func (actionComplete) isActionResult() {}
func (actionWait) isActionResult()     {}
func (actionError) isActionResult()    {}

func complete(next metal3v1.ProvisioningState) actionResult { return actionComplete{next: next} }
func wait(after time.Duration) actionResult                 { return actionWait{after: after} }
func fail(t metal3v1.ErrorType, msg string) actionResult    { return actionError{errType: t, msg: msg} }

// failOn is fail for a step that failed with err, which says whether the
// BMC was the cause (the driver's sentinel errors): msg says what failed
// and includes err.
func failOn(t metal3v1.ErrorType, err error, msg string) actionResult {
	e := actionError{errType: t, msg: msg}
	switch {
	case errors.Is(err, provisioner.ErrUnreachable), errors.Is(err, provisioner.ErrTaskStuck):
		e.bmc = ReasonBMCNotAnswering
	case errors.Is(err, provisioner.ErrMedia):
		e.bmc = ReasonBMCMediaFailed
	case errors.Is(err, provisioner.ErrCredentials):
		e.bmc = ReasonBMCCredentialsRefused
	}
	return e
}
