package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// ErrUnknownMethod is what a CustomDeploy function returns for a method
// it does not provide.
var ErrUnknownMethod = errors.New("unknown custom deploy method")

// lookupHost finds the machine's host at the deploy server by its MAC
// addresses, as ironic-python-agent looks its node up, and returns the
// host's boot configuration. It asks again until it gets an answer or ctx
// ends; "no such host" is said once on the console, as it means the image
// was booted by hand: it needs the host engine.
func lookupHost(ctx context.Context, opts Options) (deployapi.BootConfig, error) {
	lk := opts.Config.Lookup
	body, _ := json.Marshal(deployapi.LookupRequest{Scope: lk.Scope, Token: lk.Token, MACs: opts.MACs})
	url := strings.TrimSuffix(lk.EngineURL, "/") + deployapi.LookupPath
	last := ""
	for {
		cfg, err := lookupOnce(ctx, opts.HTTP, url, body)
		if err == nil {
			cfg.Lookup = lk
			opts.Logf("Looked up host %s at the deploy server %s", cfg.HostID, lk.EngineURL)
			return cfg, nil
		}
		if msg := err.Error(); msg != last {
			last = msg
			opts.Logf("Looking up this machine's host (MAC %s) at %s: %v; asking again every %s", strings.Join(opts.MACs, ", "), lk.EngineURL, err, opts.PollInterval)
			var nf errNoHost
			if d := opts.Config.Discovery; errors.As(err, &nf) && d != nil {
				// Booted by hand: tell the agent service, which tells the hub.
				if err := reportManualBoot(ctx, opts, d, msg); err != nil {
					opts.Logf("Telling the agent service that this image was booted by hand: %v", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return deployapi.BootConfig{}, ctx.Err()
		case <-time.After(opts.PollInterval):
		}
	}
}

func lookupOnce(ctx context.Context, c *http.Client, url string, body []byte) (deployapi.BootConfig, error) {
	var cfg deployapi.BootConfig
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return cfg, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return cfg, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		err := fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode == http.StatusNotFound {
			return cfg, errNoHost{err}
		}
		return cfg, err
	}
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("decoding the lookup answer: %w", err)
	}
	if cfg.EngineURL == "" || cfg.HostID == "" || cfg.Ticket == "" {
		return cfg, errors.New("the lookup answer has no engineURL, hostID or ticket")
	}
	return cfg, nil
}

// errNoHost: the deploy server has no host for this machine's MACs.
type errNoHost struct{ error }

func (e errNoHost) Unwrap() error { return e.error }

// reportManualBoot tells the agent service of the image's InfraEnv that a
// machine booted the image without a host (assistedapi.ManualBootPath).
func reportManualBoot(ctx context.Context, opts Options, d *deployapi.Discovery, reason string) error {
	body, err := json.Marshal(assistedapi.ManualBoot{MACAddresses: opts.MACs, Reason: reason})
	if err != nil {
		return err
	}
	url := strings.TrimSuffix(d.ServiceURL, "/") + fmt.Sprintf(assistedapi.ManualBootPath, d.InfraEnvID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(assistedapi.AuthHeader, d.Token)
	resp, err := opts.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
