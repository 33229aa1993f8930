package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/metalshift/metalshift/agent/deploy"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// CustomDeploy returns the custom deploy methods of a converged-flow image
// for the deploy role: start_assisted_install runs the discovery agent
// with opts until its install is done (RunUntilInstalled), registering
// with the host's proof the instructions carry; other methods fail.
func CustomDeploy(opts Options) func(ctx context.Context, ins deployapi.Instructions) error {
	return func(ctx context.Context, ins deployapi.Instructions) error {
		if ins.CustomDeploy != deployapi.MethodStartAssistedInstall {
			return fmt.Errorf("%w %q: this image provides %s", deploy.ErrUnknownMethod, ins.CustomDeploy, deployapi.MethodStartAssistedInstall)
		}
		opts.RegistrationProof = ins.RegistrationProof
		return RunUntilInstalled(ctx, opts)
	}
}

// RunUntilInstalled runs the discovery agent (Run) and returns once its
// install is done, without rebooting: the install reports its stages up
// to Rebooting and replies to the install step, then the agent stops, and
// the host engine boots the disk (the converged flow). It returns an
// error when the agent stops before, e.g. refused by the service; opts.Reboot
// is not used.
func RunUntilInstalled(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	installed := make(chan struct{})
	var once sync.Once
	logf := opts.Logf
	opts.Reboot = func(context.Context) error {
		if logf != nil {
			logf("Installation done: the host engine boots the disk")
		}
		once.Do(func() { close(installed) })
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	select {
	case <-installed:
		cancel()
		return <-done // nil: Run returns nil once ctx ends
	case err := <-done:
		if err == nil {
			err = errors.New("the discovery agent stopped before its installation was done")
			if ctx.Err() != nil {
				err = ctx.Err()
			}
		}
		return err
	}
}
