package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// DeviceInfo describes a block device, as inspection would.
type DeviceInfo = deployapi.Disk

// BlockDevice is a disk the agent can write.
type BlockDevice interface {
	io.ReaderAt
	io.WriterAt
	Info() DeviceInfo
}

// Options configure a run of the agent.
type Options struct {
	Config  deployapi.BootConfig
	Devices []BlockDevice
	// HTTP is the client for the engine and image downloads.
	HTTP *http.Client
	// PollInterval is the pause between polls and repeated reports; 0 means 2s.
	PollInterval time.Duration
	// ProgressInterval is the pause between the running reports that
	// carry the bytes written while an image is written; 0 means 30s.
	ProgressInterval time.Duration
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// Inventory reads the machine's inventory, for inspect requests; nil
	// fails them.
	Inventory func() (*deployapi.Inventory, error)
	// CustomDeploy runs the custom deploy method the image provides that
	// ins names (ins.CustomDeploy, with what comes with it), until it is
	// done; it fails methods it does not know. nil fails every custom
	// deploy.
	CustomDeploy func(ctx context.Context, ins deployapi.Instructions) error
	// MACs are the machine's MAC addresses, for the lookup of an image
	// that is not per-host (Config.Lookup).
	MACs []string
}

// Run exchanges the boot's ticket for its request's agent token, then asks
// the engine for work and does it, until its final report is accepted or
// the engine refuses the token (the request ended or is gone); then it
// waits for ctx to end (the host is powered off or rebooted), sending an
// accepted final report again now and then until the engine says the
// request ended (standBy). Errors talking to the engine are retried.
func Run(ctx context.Context, opts Options) error {
	if opts.PollInterval == 0 {
		opts.PollInterval = 2 * time.Second
	}
	if opts.ProgressInterval == 0 {
		opts.ProgressInterval = 30 * time.Second
	}
	if opts.HTTP == nil {
		opts.HTTP = http.DefaultClient
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Config.Lookup != nil && opts.Config.HostID == "" {
		cfg, err := lookupHost(ctx, opts)
		if err != nil {
			return err
		}
		opts.Config = cfg
	}
	a := &agent{opts: opts, session: newSession()}
	if err := a.exchange(ctx); err != nil {
		if ctx.Err() == nil {
			opts.Logf("%v", err)
		}
		<-ctx.Done()
		return nil
	}
	for {
		if err := a.step(ctx); errors.Is(err, errFinished) {
			if a.accepted {
				a.standBy(ctx)
			}
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.PollInterval):
		}
	}
}

type agent struct {
	opts Options
	// session identifies this boot of the agent in its token request and
	// reports.
	session string
	// token is the request's agent token, from the exchange of the ticket.
	token string
	// generation is the request the token is for.
	generation string
	// last is the final report of the request, repeated until the engine
	// accepts it.
	last *deployapi.StatusReport
	// lastErr is the last error logged, so that a repeated one is not.
	lastErr string
	// accepted: the engine accepted the final report.
	accepted bool
}

// errFinished: the agent has nothing more to do in this boot.
var errFinished = errors.New("finished")

// exchange trades the boot's ticket for the request's agent token, asking
// again while the engine cannot answer. A refusal is final: the ticket was
// spent (by another boot, or someone else that had it), expired, or is for
// a request that is gone; the engine boots the host again for a new one.
func (a *agent) exchange(ctx context.Context) error {
	body, _ := json.Marshal(deployapi.TokenRequest{Session: a.session})
	for {
		resp, err := a.do(ctx, http.MethodPost, deployapi.TokenPath, a.opts.Config.Ticket, body)
		if err == nil {
			var tr deployapi.TokenResponse
			err = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&tr)
			resp.Body.Close()
			if err == nil && tr.Token != "" {
				a.token, a.generation = tr.Token, tr.Generation
				a.opts.Logf("Got the agent token of request %s", tr.Generation)
				return nil
			}
			err = fmt.Errorf("decoding the agent token: %w", err)
		}
		var se *statusError
		if errors.As(err, &se) && se.permanent() {
			return fmt.Errorf("the engine refused this boot's ticket; nothing more to do until the host is booted again: %w", err)
		}
		a.logOnce("Asking the engine for the agent token: %v", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.opts.PollInterval):
		}
	}
}

// step asks for instructions and runs them, or repeats the final report;
// errFinished means there is nothing more to do.
func (a *agent) step(ctx context.Context) error {
	if a.last != nil {
		return a.finalReport(ctx)
	}
	ins, err := a.instructions(ctx)
	if err != nil {
		return a.failed("Asking the engine for instructions: %v", err)
	}
	if ins.Action == deployapi.ActionWait {
		return nil
	}
	// Claim the request before touching a disk: the engine records the
	// claim for this session, and refuses it when another boot of the agent
	// claimed the request already. Without an accepted claim nothing is
	// written; the next poll tries again.
	if err := a.report(ctx, deployapi.StatusReport{Action: ins.Action, Generation: ins.Generation, Phase: deployapi.PhaseRunning, Session: a.session}); err != nil {
		return a.failed("Claiming request %s: %v", ins.Generation, err)
	}
	rep := a.run(ctx, ins)
	if ctx.Err() != nil {
		return nil
	}
	a.last = &rep
	return a.finalReport(ctx)
}

// finalReport sends the request's final report until it is accepted (or
// the engine says the request ended).
func (a *agent) finalReport(ctx context.Context) error {
	err := a.report(ctx, *a.last)
	if err == nil {
		a.opts.Logf("The engine has the outcome of request %s", a.last.Generation)
		a.accepted = true
		return errFinished
	}
	return a.failed("Reporting %s %s: %v", a.last.Action, a.last.Phase, err)
}

// standBy sends the accepted final report again every ProgressInterval
// until the engine refuses it (the request ended: the engine acted on it)
// or the host is powered off or rebooted (ctx). An engine whose state was
// restored from a backup taken before it recorded the report has lost it
// and waits for an agent that is done; it hears it again here. An engine
// that has it takes a repeated report as nothing new.
func (a *agent) standBy(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.opts.ProgressInterval):
		}
		var se *statusError
		if err := a.report(ctx, *a.last); errors.As(err, &se) && se.permanent() {
			return
		}
	}
}

// failed logs an error once and returns errFinished when the engine
// refused the token for good.
func (a *agent) failed(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusGone {
		a.opts.Logf("%v; nothing more to do until the host is booted again", err)
		return errFinished
	}
	a.logOnce("%v", err)
	return err
}

func (a *agent) logOnce(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); msg != a.lastErr {
		a.lastErr = msg
		a.opts.Logf("%s", msg)
	}
}

func (a *agent) run(ctx context.Context, ins *deployapi.Instructions) deployapi.StatusReport {
	rep := deployapi.StatusReport{Action: ins.Action, Generation: ins.Generation, Phase: deployapi.PhaseDone, Session: a.session}
	var err error
	switch ins.Action {
	case deployapi.ActionDeploy:
		rep.RootDevice, rep.BytesWritten, err = a.deploy(ctx, ins)
	case deployapi.ActionClean:
		err = a.clean()
	case deployapi.ActionCustomDeploy:
		if a.opts.CustomDeploy == nil {
			err = fmt.Errorf("custom deploy method %q: this image provides no custom deploy methods", ins.CustomDeploy)
			break
		}
		a.opts.Logf("Running custom deploy method %s", ins.CustomDeploy)
		err = a.opts.CustomDeploy(ctx, *ins)
	case deployapi.ActionInspect:
		if a.opts.Inventory == nil {
			err = errors.New("this agent cannot read the machine's inventory")
			break
		}
		rep.Inventory, err = a.opts.Inventory()
	default:
		err = fmt.Errorf("unknown action %q: this agent speaks deploy API %s", ins.Action, deployapi.Version)
	}
	if err != nil {
		rep.Phase, rep.Message = deployapi.PhaseFailed, err.Error()
		a.opts.Logf("%s failed: %v", ins.Action, err)
	} else {
		a.opts.Logf("%s done", ins.Action)
	}
	return rep
}

func (a *agent) instructions(ctx context.Context) (*deployapi.Instructions, error) {
	resp, err := a.do(ctx, http.MethodGet, deployapi.InstructionsPath, a.token, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ins := &deployapi.Instructions{}
	if err := json.NewDecoder(resp.Body).Decode(ins); err != nil {
		return nil, fmt.Errorf("decoding instructions: %w", err)
	}
	return ins, nil
}

func (a *agent) report(ctx context.Context, rep deployapi.StatusReport) error {
	data, _ := json.Marshal(rep)
	resp, err := a.do(ctx, http.MethodPost, deployapi.StatusPath, a.token, data)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// heartbeat sends a running report with the bytes written every
// ProgressInterval while an image is written, until stop is called: the
// engine sees the write progress (and that the agent is alive), and the
// report's time moves with it. A report that does not get through is
// not repeated; the next one carries the newer count.
func (a *agent) heartbeat(ctx context.Context, ins *deployapi.Instructions, progress *atomic.Int64) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.opts.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rep := deployapi.StatusReport{Action: ins.Action, Generation: ins.Generation, Phase: deployapi.PhaseRunning, Session: a.session, BytesWritten: progress.Load()}
			if err := a.report(ctx, rep); err != nil && ctx.Err() == nil {
				a.opts.Logf("Reporting progress (%d bytes written): %v", rep.BytesWritten, err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// newSession returns a random identifier of this boot of the agent.
func newSession() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// statusError is an answer of the engine other than success.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// permanent: asking again with the same credential cannot succeed.
func (e *statusError) permanent() bool {
	switch e.code {
	case http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusGone:
		return true
	}
	return false
}

// do calls the engine with bearer as the credential.
func (a *agent) do(ctx context.Context, method, pathFmt, bearer string, body []byte) (*http.Response, error) {
	url := strings.TrimSuffix(a.opts.Config.EngineURL, "/") + fmt.Sprintf(pathFmt, a.opts.Config.HostID)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.opts.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		return nil, &statusError{code: resp.StatusCode, msg: fmt.Sprintf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(msg))}
	}
	return resp, nil
}

// errNoDisk is returned when no disk matches the hints.
var errNoDisk = errors.New("no disk matches the root device hints")
