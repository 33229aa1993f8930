package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/metalshift/metalshift/agent/deploy"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// Options configure a run of the discovery agent.
type Options struct {
	// Config is the discovery section of the boot configuration.
	Config deployapi.Discovery
	// HostID is the machine's UUID (SMBIOS system UUID); the Agent object
	// is named after it.
	HostID string
	// Devices are the machine's disks.
	Devices []deploy.BlockDevice
	// HTTP is the client for the service and image downloads; nil means
	// http.DefaultClient.
	HTTP *http.Client
	// Inventory reads the machine's inventory in the REST shape; nil fails
	// inventory steps.
	Inventory func() (*assistedapi.Inventory, error)
	// Logf receives one line per step and per problem; nil discards them.
	// Neither the token, the host's credential nor Ignition content is
	// ever logged.
	Logf func(format string, args ...any)
	// Reboot is called at the end of a successful install ("Rebooting"):
	// the real agent reboots the machine, the simulator resets its
	// machine. nil fails installs before they write anything.
	Reboot func(ctx context.Context) error
	// RunBootstrap runs the bootstrap Ignition in the live environment
	// (role bootstrap of a multi-node cluster): it must start the
	// cluster's temporary control plane and keep it running until ctx
	// ends. nil: installs with role bootstrap fail with a clear message.
	RunBootstrap func(ctx context.Context, ignition []byte) error
	// ControlPlaneReady reports how many master Nodes are Ready in the
	// cluster whose admin kubeconfig is given (the bootstrap host's
	// "Waiting for control plane"); nil: ask the cluster with client-go,
	// with the kubeconfig the bootstrap Ignition writes at
	// bootstrapnode.AdminKubeconfigPath.
	ControlPlaneReady func(ctx context.Context, kubeconfig []byte) (int, error)
	// PollInterval, when set, caps the pause between polls (which is
	// otherwise what the service says, next_instruction_seconds) and the
	// retry and wait intervals: for tests.
	PollInterval time.Duration
	// ServiceWait is how long a call of the install role (a progress
	// report, a file download, the install step's reply, the OS image
	// download) keeps trying while the service does not answer; 0 means
	// DefaultServiceWait. Past it the agent leaves the install step
	// without reporting a failure and goes back to polling. Registration
	// and polls keep trying for as long as the agent runs.
	ServiceWait time.Duration
	// Lookup resolves a name for the domain-resolution step; nil means the
	// system's resolver.
	Lookup func(ctx context.Context, name string) []net.IP
	// Version is the discovery_agent_version the agent registers with.
	Version string
	// RegistrationProof is the host engine's proof that it started this
	// agent for a BareMetalHost (the converged flow; CustomDeploy sets it),
	// sent on registrations; empty: none.
	RegistrationProof string
}

// defaultInstructionInterval is the pause between polls when the service
// does not say (upstream's default).
const defaultInstructionInterval = 60 * time.Second

// callTimeout bounds one request to the service, its answer read: a
// service that went away without closing its connections (a network
// partition) is then tried again.
const callTimeout = 2 * time.Minute

// errReregister ends a poll loop: the service asked the agent to register
// again (post_step_action exit), or no longer knows the host.
var errReregister = errors.New("registering again")

// Run registers the host with the agent service and runs the instructions
// it gets until ctx ends (nil) or the service refuses the agent (an error
// naming the status: 401, 403, 404 or 409 on registration). After a
// successful install it reboots the machine and waits for ctx to end.
func Run(ctx context.Context, opts Options) error {
	if opts.HTTP == nil {
		opts.HTTP = http.DefaultClient
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.ControlPlaneReady == nil {
		opts.ControlPlaneReady = controlPlaneReady
	}
	if opts.ServiceWait <= 0 {
		opts.ServiceWait = DefaultServiceWait
	}
	a := &agent{opts: opts}
	for {
		host, err := a.register(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		a.opts.Logf("Registered host %s with infra-env %s: %s", opts.HostID, opts.Config.InfraEnvID, host.Status)
		err = a.serve(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errReregister):
			continue
		default:
			return err
		}
	}
}

type agent struct {
	opts Options
	// next is the service's last next_instruction_seconds.
	next int64
	// hostKey is the host's credential, which the registration of a new
	// host answered; the agent keeps it for as long as it runs (in
	// memory only) and sends it on every call, registrations again
	// included. The InfraEnv's token only registers.
	hostKey string
	// link follows whether the service answers.
	link link
}

// register posts HostCreateParams until the service answers; transient
// errors are retried for as long as it takes, refusals returned.
func (a *agent) register(ctx context.Context) (*assistedapi.Host, error) {
	path := assistedapi.Path(assistedapi.RegisterPath, a.opts.Config.InfraEnvID)
	params := assistedapi.HostCreateParams{HostID: a.opts.HostID, DiscoveryAgentVersion: a.opts.Version}
	host := &assistedapi.Host{}
	var hostKey string
	err := a.retry(ctx, 0, "Registering", func() error {
		h, err := a.do(ctx, true, http.MethodPost, path, nil, params, host)
		hostKey = h.Get(assistedapi.HostKeyHeader)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("registering host %s with infra-env %s: %w", a.opts.HostID, a.opts.Config.InfraEnvID, err)
	}
	if hostKey != "" {
		a.hostKey = hostKey
	}
	if a.hostKey == "" {
		return nil, fmt.Errorf("registering host %s with infra-env %s: the service answered no host credential (%s)",
			a.opts.HostID, a.opts.Config.InfraEnvID, assistedapi.HostKeyHeader)
	}
	return host, nil
}

// serve polls for instructions and runs them until ctx ends, the service
// asks the agent to register again (errReregister) or refuses it.
func (a *agent) serve(ctx context.Context) error {
	for {
		steps, err := a.instructions(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case statusIs(err, http.StatusNotFound):
			a.opts.Logf("The service no longer knows host %s: registering again", a.opts.HostID)
			return errReregister
		case statusIs(err, http.StatusUnauthorized, http.StatusForbidden):
			return fmt.Errorf("asking for instructions: %w", err)
		case err != nil:
			a.opts.Logf("Asking for instructions: %v", err)
		default:
			a.next = steps.NextInstructionSeconds
			for _, st := range steps.Instructions {
				rebooted, err := a.runStep(ctx, st)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					return err
				}
				if rebooted {
					<-ctx.Done()
					return ctx.Err()
				}
			}
			if steps.PostStepAction == assistedapi.PostStepExit {
				a.opts.Logf("The service asks the agent to register again")
				return errReregister
			}
		}
		if !sleep(ctx, a.interval()) {
			return ctx.Err()
		}
	}
}

// instructions polls for instructions, trying again while the service does
// not answer, for as long as it takes.
func (a *agent) instructions(ctx context.Context) (*assistedapi.Steps, error) {
	var steps *assistedapi.Steps
	err := a.retry(ctx, 0, "Asking for instructions", func() error {
		var err error
		steps, err = a.poll(ctx)
		return err
	})
	return steps, err
}

// poll asks for instructions once.
func (a *agent) poll(ctx context.Context) (*assistedapi.Steps, error) {
	steps := &assistedapi.Steps{}
	path := assistedapi.Path(assistedapi.InstructionsPath, a.opts.Config.InfraEnvID, a.opts.HostID)
	if err := a.call(ctx, http.MethodGet, path, nil, nil, steps); err != nil {
		return nil, err
	}
	return steps, nil
}

// interval is the pause between polls.
func (a *agent) interval() time.Duration {
	d := time.Duration(a.next) * time.Second
	if d <= 0 {
		d = defaultInstructionInterval
	}
	return a.cap(d)
}

// cap shortens d to PollInterval when that is set.
func (a *agent) cap(d time.Duration) time.Duration {
	if a.opts.PollInterval > 0 && d > a.opts.PollInterval {
		return a.opts.PollInterval
	}
	return d
}

// heartbeat keeps polling for instructions while a long step runs, so that
// the service sees the host connected, as upstream's agent keeps polling
// while its installer runs. What it gets is left: the service repeats
// instructions that got no reply. Its polls also tell the link when the
// service is back, which wakes the install's waiting calls.
func (a *agent) heartbeat(ctx context.Context, every time.Duration) {
	for sleep(ctx, every) {
		_, _ = a.poll(ctx)
	}
}

// reply posts a step's result, trying again while the service does not
// answer, for at most ServiceWait.
func (a *agent) reply(ctx context.Context, r assistedapi.StepReply) {
	path := assistedapi.Path(assistedapi.InstructionsPath, a.opts.Config.InfraEnvID, a.opts.HostID)
	err := a.retry(ctx, a.opts.ServiceWait, "Replying to step "+r.StepID, func() error {
		return a.call(ctx, http.MethodPost, path, nil, r, nil)
	})
	if err != nil && ctx.Err() == nil {
		a.opts.Logf("Replying to step %s (%s): %v", r.StepType, r.StepID, err)
	}
}

// progress reports an installation stage, trying again while the service
// does not answer, so that the service ends up with every stage, the
// latest included; it returns errUnreachable when the service did not
// answer for ServiceWait. A report the service refuses is logged, not
// fatal, as upstream's installer does.
func (a *agent) progress(ctx context.Context, stage assistedapi.HostStage, info string) error {
	path := assistedapi.Path(assistedapi.ProgressPath, a.opts.Config.InfraEnvID, a.opts.HostID)
	p := assistedapi.HostProgress{CurrentStage: stage, ProgressInfo: info}
	err := a.retry(ctx, a.opts.ServiceWait, "Reporting stage "+string(stage), func() error {
		return a.call(ctx, http.MethodPut, path, nil, p, nil)
	})
	if err != nil && ctx.Err() == nil {
		a.opts.Logf("Reporting stage %q: %v", stage, err)
	}
	if errors.Is(err, errUnreachable) {
		return err
	}
	return nil
}

// file downloads a file of the cluster from the service (an Ignition),
// trying again while the service does not answer, for at most
// ServiceWait.
func (a *agent) file(ctx context.Context, clusterID, name string) ([]byte, error) {
	path := assistedapi.Path(assistedapi.FilesPath, clusterID)
	var data []byte
	err := a.retry(ctx, a.opts.ServiceWait, "Downloading "+name, func() error {
		var buf bytes.Buffer
		err := a.call(ctx, http.MethodGet, path, url.Values{"file_name": {name}}, nil, &buf)
		data = buf.Bytes()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w", name, err)
	}
	return data, nil
}

// call sends a request to the service with the host's credential: in,
// when not nil, as JSON; the answer is decoded into out (JSON), or copied
// when out is an io.Writer.
func (a *agent) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	_, err := a.do(ctx, false, method, path, query, in, out)
	return err
}

// do is call that also returns the answer's headers (empty when there was
// no answer). A registration carries the InfraEnv's token and, once the
// agent has one, the host's credential; other calls the host's credential
// only.
func (a *agent) do(ctx context.Context, register bool, method, path string, query url.Values, in, out any) (http.Header, error) {
	header := http.Header{}
	u := strings.TrimSuffix(a.opts.Config.ServiceURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return header, err
		}
		body = bytes.NewReader(data)
	}
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, u, body)
	if err != nil {
		return header, err
	}
	if register {
		req.Header.Set(assistedapi.AuthHeader, a.opts.Config.Token)
		if a.opts.RegistrationProof != "" {
			req.Header.Set(assistedapi.HostProofHeader, a.opts.RegistrationProof)
		}
	}
	if a.hostKey != "" {
		req.Header.Set(assistedapi.HostKeyHeader, a.hostKey)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	header, err = a.send(req, method, u, out)
	switch {
	case err == nil:
		a.answered()
	case ctx.Err() != nil:
	case unanswered(err):
		a.lost(err)
	default:
		a.answered()
	}
	return header, err
}

// send sends req and reads the answer into out (see call).
func (a *agent) send(req *http.Request, method, u string, out any) (http.Header, error) {
	header := http.Header{}
	resp, err := a.opts.HTTP.Do(req)
	if err != nil {
		return header, err
	}
	defer resp.Body.Close()
	header = resp.Header
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return header, &statusError{method: method, url: u, code: resp.StatusCode, status: resp.Status,
			body: string(bytes.TrimSpace(msg)), retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	}
	switch o := out.(type) {
	case nil:
		return header, nil
	case io.Writer:
		if _, err := io.Copy(o, resp.Body); err != nil {
			return header, fmt.Errorf("%s %s: reading the answer: %w", method, u, err)
		}
	default:
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return header, fmt.Errorf("%s %s: decoding the answer: %w", method, u, err)
		}
	}
	return header, nil
}

// sleep waits d or until ctx ends; it tells whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
