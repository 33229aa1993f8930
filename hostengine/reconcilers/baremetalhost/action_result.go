package baremetalhost

import (
	"time"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
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
}

func (actionComplete) isActionResult() {}
func (actionWait) isActionResult()     {}
func (actionError) isActionResult()    {}

func complete(next metal3v1.ProvisioningState) actionResult { return actionComplete{next: next} }
func wait(after time.Duration) actionResult                 { return actionWait{after: after} }
func fail(t metal3v1.ErrorType, msg string) actionResult    { return actionError{errType: t, msg: msg} }
