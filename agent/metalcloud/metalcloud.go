package metalcloud

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

	"github.com/metalshift/metalshift/agent/configdrive"
	"github.com/metalshift/metalshift/agent/deploy"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// ProviderIDPrefix starts the provider ID of a machine of the cloud: the
// installed OS registers its Node with equinixmetal://<device ID>, the
// Cluster API provider's EquinixMetalMachine spec.providerID.
const ProviderIDPrefix = "equinixmetal://"

// Defaults of the metadata reads' retries.
const (
	DefaultRetries    = 8
	DefaultRetryPause = time.Second
	maxRetryPause     = 30 * time.Second
	// maxAnswer bounds the metadata and the user data (the cloud's own
	// userdata limit is far below).
	maxAnswer = 4 << 20
)

// Options configure a run.
type Options struct {
	// Config is the boot configuration; its MetalCloud section is required.
	Config deployapi.BootConfig
	// Devices are the machine's disks.
	Devices []deploy.BlockDevice
	// HTTP is the metadata service's client; on a machine of the cloud
	// its calls come from the machine's own address, by which the service
	// knows it (http.DefaultClient when nil).
	HTTP *http.Client
	// ImageHTTP downloads the OS image (HTTP when nil).
	ImageHTTP *http.Client
	// Network applies the network the metadata describes (required).
	Network NetworkConfigurator
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// Retries is how many more times a metadata or user data read that
	// failed for a reason that may pass (the network, a 5xx, 429) is
	// tried (DefaultRetries when 0, none when negative); the pauses
	// between them double from RetryPause (DefaultRetryPause when 0) up to
	// 30 seconds.
	Retries    int
	RetryPause time.Duration
}

// Run installs the machine: metadata, network, user data, image, config
// drive; see the package documentation. It returns once the disk is
// written (the caller reboots into it), or with the first error; nothing
// is written to a disk before the user data was found to be Ignition.
func Run(ctx context.Context, opts Options) error {
	mc := opts.Config.MetalCloud
	switch {
	case mc == nil:
		return errors.New("the boot configuration has no metal cloud section")
	case mc.MetadataURL == "":
		return errors.New("the boot configuration's metal cloud section has no metadata URL")
	case mc.Image.URL == "":
		return errors.New("the boot configuration's metal cloud section has no image URL")
	case opts.Network == nil:
		return errors.New("no network configurator")
	}
	if opts.HTTP == nil {
		opts.HTTP = http.DefaultClient
	}
	if opts.ImageHTTP == nil {
		opts.ImageHTTP = opts.HTTP
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	switch {
	case opts.Retries == 0:
		opts.Retries = DefaultRetries
	case opts.Retries < 0:
		opts.Retries = 0
	}
	if opts.RetryPause == 0 {
		opts.RetryPause = DefaultRetryPause
	}
	base := strings.TrimSuffix(mc.MetadataURL, "/")
	opts.Logf("Metal cloud installer started; reading the metadata at %s", base)

	data, err := get(ctx, opts, "the metadata", base+equinixapi.MetadataPath)
	if err != nil {
		return err
	}
	var md equinixapi.Metadata
	if err := json.Unmarshal(data, &md); err != nil {
		return fmt.Errorf("the metadata is not JSON: %w", err)
	}
	if md.ID == "" || md.Hostname == "" {
		return errors.New("the metadata has no device ID or hostname")
	}
	opts.Logf("This is device %s (%s)", md.ID, md.Hostname)

	// The network first: the user data and the image come over it.
	n, err := NetworkFromMetadata(md)
	if err != nil {
		return err
	}
	if err := opts.Network.Configure(ctx, n); err != nil {
		return fmt.Errorf("configuring %s: %w", n.Bond, err)
	}
	macs := make([]string, 0, len(n.Members))
	for _, m := range n.Members {
		macs = append(macs, m.MAC)
	}
	opts.Logf("Configured %s (mode %d) of %s", n.Bond, n.BondMode, strings.Join(macs, ", "))
	for _, a := range n.Addresses {
		opts.Logf("Configured %s address %s", n.Bond, a)
	}

	userdata, err := get(ctx, opts, "the user data", base+equinixapi.UserdataPath)
	if err != nil {
		return err
	}
	if err := checkIgnition(userdata); err != nil {
		return err
	}

	dev, err := deploy.ChooseDevice(opts.Devices, nil)
	if err != nil {
		return fmt.Errorf("choosing the install disk: %w", err)
	}
	name := dev.Info().Name
	opts.Logf("Writing %s to %s", redact(mc.Image.URL), name)
	written, err := deploy.WriteImage(ctx, opts.ImageHTTP, dev, mc.Image)
	if err != nil {
		return fmt.Errorf("writing the image to %s: %w", name, err)
	}
	meta, err := json.Marshal(map[string]string{
		"uuid": md.ID, "name": md.Hostname, "local-hostname": md.Hostname, "providerid": ProviderIDPrefix + md.ID,
	})
	if err != nil {
		return err
	}
	if err := deploy.WriteConfigDrive(dev, configdrive.Contents{UserData: userdata, MetaData: meta}, opts.Logf); err != nil {
		return err
	}
	if err := deploy.Flush(dev); err != nil {
		return err
	}
	opts.Logf("Installed %s on %s (%d bytes) with its config drive; rebooting into the disk", md.Hostname, name, written)
	return nil
}

// checkIgnition says whether the user data is an Ignition config: JSON
// with ignition.version. The installed OS reads nothing else, so anything
// else (a cloud-config, a script) would boot a machine that never joins.
// The error does not quote the user data, which may hold secrets.
func checkIgnition(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return errors.New("the device has no user data: it must be an Ignition config")
	}
	if trimmed[0] == '#' {
		return errors.New("the user data is not an Ignition config: it starts with '#' (a script or cloud-config), and the installed OS reads Ignition (JSON with ignition.version) only")
	}
	var cfg struct {
		Ignition *struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(trimmed, &cfg); err != nil {
		return fmt.Errorf("the user data is not an Ignition config: it is not JSON (%v)", err)
	}
	if cfg.Ignition == nil || cfg.Ignition.Version == "" {
		return errors.New("the user data is not an Ignition config: it has no ignition.version")
	}
	return nil
}

// get reads url, trying again as Options.Retries says when it fails for a
// reason that may pass; what names the thing read, for errors and logs.
func get(ctx context.Context, opts Options, what, url string) ([]byte, error) {
	pause := opts.RetryPause
	for attempt := 0; ; attempt++ {
		data, err := getOnce(ctx, opts.HTTP, url)
		if err == nil {
			return data, nil
		}
		var te *transientError
		if !errors.As(err, &te) || ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %w", what, err)
		}
		if attempt >= opts.Retries {
			return nil, fmt.Errorf("reading %s: %w (gave up after %d attempts)", what, err, attempt+1)
		}
		opts.Logf("Reading %s: %v; trying again in %s", what, err, pause)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading %s: %w", what, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, maxRetryPause)
	}
}

// transientError is a failure that may pass: the network's, or an answer
// that says to come back.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func getOnce(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &transientError{err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("GET %s: %s: %s", redact(url), resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
			return nil, &transientError{err}
		}
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, &transientError{err}
	}
	if len(data) > maxAnswer {
		return nil, fmt.Errorf("GET %s: the answer is over %d bytes", redact(url), maxAnswer)
	}
	return data, nil
}

// redact drops a URL's query (signatures) for logs and errors.
func redact(url string) string {
	u, _, _ := strings.Cut(url, "?")
	return u
}
