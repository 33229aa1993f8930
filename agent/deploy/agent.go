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

// Run asks the engine for work and does it until ctx ends (the host is
// powered off or rebooted). Errors talking to the engine are retried.
func Run(ctx context.Context, opts Options) error {
	if opts.PollInterval == 0 {
		opts.PollInterval = 2 * time.Second
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
	for {
		a.step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.PollInterval):
		}
	}
}

type agent struct {
	opts Options
	// session identifies this boot of the agent in its reports.
	session string
	// last is the final report of the last request handled; it is
	// repeated while the engine still asks for that request.
	last *deployapi.StatusReport
}

func (a *agent) step(ctx context.Context) {
	ins, err := a.instructions(ctx)
	if err != nil {
		a.opts.Logf("Asking the engine for instructions: %v", err)
		return
	}
	if ins.Action == deployapi.ActionWait {
		return
	}
	if a.last != nil && a.last.Generation == ins.Generation {
		_ = a.report(ctx, *a.last)
		return
	}
	// Claim the request before touching a disk: the engine records the
	// claim for this session, and refuses it when another boot of the agent
	// claimed the request already. Without an accepted claim nothing is
	// written; the next poll tries again.
	if err := a.report(ctx, deployapi.StatusReport{Action: ins.Action, Generation: ins.Generation, Phase: deployapi.PhaseRunning, Session: a.session}); err != nil {
		return
	}
	rep := a.run(ctx, ins)
	if ctx.Err() != nil {
		return
	}
	a.last = &rep
	_ = a.report(ctx, rep)
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
	resp, err := a.call(ctx, http.MethodGet, deployapi.InstructionsPath, nil)
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
	resp, err := a.call(ctx, http.MethodPost, deployapi.StatusPath, data)
	if err != nil {
		a.opts.Logf("Reporting %s %s: %v", rep.Action, rep.Phase, err)
		return err
	}
	resp.Body.Close()
	return nil
}

// newSession returns a random identifier of this boot of the agent.
func newSession() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (a *agent) call(ctx context.Context, method, pathFmt string, body []byte) (*http.Response, error) {
	url := strings.TrimSuffix(a.opts.Config.EngineURL, "/") + fmt.Sprintf(pathFmt, a.opts.Config.HostID)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.opts.Config.Token)
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
		return nil, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(msg))
	}
	return resp, nil
}

// errNoDisk is returned when no disk matches the hints.
var errNoDisk = errors.New("no disk matches the root device hints")
