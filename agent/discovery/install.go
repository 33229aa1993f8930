package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/metalshift/metalshift/agent/configdrive"
	"github.com/metalshift/metalshift/agent/deploy"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// controlPlanePoll is the pause between asks of the bootstrap host while
// it waits for the control plane.
const controlPlanePoll = 2 * time.Second

// installerFlags are the coreos-installer flags an install step may carry
// (upstream's allow list), and whether each takes a value; metalshift
// writes a raw image and ignores them.
var installerFlags = map[string]bool{
	"--append-karg": true, "--delete-karg": true, "-n": false, "--copy-network": false, "--network-dir": true,
	"--save-partlabel": true, "--save-partindex": true, "--image-url": true, "--image-file": true,
}

// installation is one run of the install step.
type installation struct {
	a   *agent
	req assistedapi.InstallCmdRequest
	dev deploy.BlockDevice
	// ignition is the host's Ignition, written as the config drive's user data.
	ignition []byte
	// kubeconfig is the cluster's admin kubeconfig, from the bootstrap
	// Ignition (bootstrap role only).
	kubeconfig []byte
	// bootstrapDone receives what RunBootstrap returned.
	bootstrapDone chan error
	bootstrapErr  error
}

// install runs the install step: it reports the stages of the host's role
// and does what each stands for; a failure is reported as stage Failed,
// but for the service not answering (errUnreachable), which is no failure
// of the install.
func (a *agent) install(ctx context.Context, args []string) error {
	var req assistedapi.InstallCmdRequest
	if err := stepArgs(assistedapi.Step{StepType: assistedapi.StepInstall, Args: args}, &req); err != nil {
		_ = a.progress(ctx, assistedapi.StageFailed, err.Error())
		return err
	}
	in := &installation{a: a, req: req}
	err := in.run(ctx)
	if err != nil && ctx.Err() == nil && !errors.Is(err, errUnreachable) {
		_ = a.progress(ctx, assistedapi.StageFailed, err.Error())
	}
	return err
}

func (in *installation) run(ctx context.Context) error {
	stages, err := Stages(in.req.Role, in.req.HighAvailabilityMode)
	if err != nil {
		return err
	}
	for _, stage := range stages {
		if err := in.a.progress(ctx, stage, ""); err != nil {
			return err
		}
		if err := in.do(ctx, stage); err != nil {
			return err
		}
		if err := in.bootstrapFailed(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// do is the work of a stage.
func (in *installation) do(ctx context.Context, stage assistedapi.HostStage) error {
	switch stage {
	case assistedapi.StageStartingInstallation:
		return in.validate()
	case assistedapi.StageInstalling:
		return in.fetch(ctx)
	case assistedapi.StageWritingImageToDisk:
		return in.write(ctx)
	case assistedapi.StageWaitingForControlPlane:
		if in.bootstrap() {
			return in.waitControlPlane(ctx)
		}
	}
	// Copying registry data (none), waiting for bootkube and the
	// controller (the bootstrap runner's), rebooting (after the reply).
	return nil
}

// Stages returns the stages the agent reports for an install of role in a
// cluster of high availability mode ha, in upstream's order; the later
// ones (Configuring, Joined, Done) are the service's.
func Stages(role, ha string) ([]assistedapi.HostStage, error) {
	const (
		st  = assistedapi.StageStartingInstallation
		in  = assistedapi.StageInstalling
		wr  = assistedapi.StageWritingImageToDisk
		cp  = assistedapi.StageCopyingRegistryData
		wcp = assistedapi.StageWaitingForControlPlane
		wb  = assistedapi.StageWaitingForBootkube
		wc  = assistedapi.StageWaitingForController
		rb  = assistedapi.StageRebooting
	)
	if ha == assistedapi.HighAvailabilityNone {
		if role != assistedapi.RoleBootstrap && role != assistedapi.RoleMaster {
			return nil, fmt.Errorf("role %q in a single-node cluster: want bootstrap or master", role)
		}
		return []assistedapi.HostStage{st, in, wb, wr, cp, rb}, nil
	}
	if ha != "" && ha != assistedapi.HighAvailabilityFull {
		return nil, fmt.Errorf("unknown high_availability_mode %q: want Full or None", ha)
	}
	switch role {
	case assistedapi.RoleBootstrap:
		return []assistedapi.HostStage{st, in, wr, cp, wcp, wb, wc, rb}, nil
	case assistedapi.RoleMaster, assistedapi.RoleArbiter:
		return []assistedapi.HostStage{st, in, wr, cp, rb}, nil
	case assistedapi.RoleWorker:
		return []assistedapi.HostStage{st, in, wr, wcp, rb}, nil
	}
	return nil, fmt.Errorf("unknown role %q: want bootstrap, master, arbiter or worker", role)
}

// bootstrap tells whether the host bootstraps a multi-node cluster from
// the live environment (a single-node cluster bootstraps in place).
func (in *installation) bootstrap() bool {
	return in.req.Role == assistedapi.RoleBootstrap && in.req.HighAvailabilityMode != assistedapi.HighAvailabilityNone
}

// validate checks the request before anything is fetched or written.
func (in *installation) validate() error {
	if err := validateInstallerArgs(in.req.InstallerArgs); err != nil {
		return err
	}
	if in.req.OSImage.URL == "" {
		return errors.New("the install request has no os_image.url")
	}
	if in.req.OSImage.Checksum == "" {
		return errors.New("the install request's os_image has no checksum")
	}
	if in.req.IgnitionFileName == "" {
		return errors.New("the install request has no ignition_file_name")
	}
	if in.req.ClusterID == "" {
		return errors.New("the install request has no cluster_id")
	}
	dev, err := in.a.device(in.req.BootDevice)
	if err != nil {
		return fmt.Errorf("boot_device: %w", err)
	}
	in.dev = dev
	if in.a.opts.Reboot == nil {
		return errors.New("this agent cannot reboot the machine after the installation")
	}
	if in.bootstrap() {
		if in.a.opts.RunBootstrap == nil {
			return errors.New("this agent cannot run the bootstrap control plane of a multi-node cluster: choose another host as the bootstrap, or install the cluster without this one")
		}
		if in.req.BootstrapIgnitionFileName == "" {
			return errors.New("the install request of the bootstrap host has no bootstrap_ignition_file_name")
		}
	}
	return nil
}

// validateInstallerArgs accepts only upstream's allowed coreos-installer
// flags, with their values.
func validateInstallerArgs(args []string) error {
	for i := 0; i < len(args); i++ {
		flag, _, inline := strings.Cut(args[i], "=")
		takesValue, ok := installerFlags[flag]
		if !ok {
			return fmt.Errorf("installer argument %q is not allowed: use --append-karg, --delete-karg, -n, --copy-network, --network-dir, --save-partlabel, --save-partindex, --image-url or --image-file", args[i])
		}
		if takesValue && !inline {
			if i+1 == len(args) {
				return fmt.Errorf("installer argument %s has no value", flag)
			}
			i++
		}
	}
	return nil
}

// fetch downloads the host's Ignition and, on the bootstrap host, the
// bootstrap Ignition, which it starts running.
func (in *installation) fetch(ctx context.Context) error {
	ign, err := in.a.file(ctx, in.req.ClusterID, in.req.IgnitionFileName)
	if err != nil {
		return err
	}
	if !json.Valid(ign) {
		return fmt.Errorf("%s is not an Ignition config (not JSON)", in.req.IgnitionFileName)
	}
	in.ignition = ign
	if !in.bootstrap() {
		return nil
	}
	bootIgn, err := in.a.file(ctx, in.req.ClusterID, in.req.BootstrapIgnitionFileName)
	if err != nil {
		return err
	}
	kubeconfig, found, err := ignitionFile(bootIgn, bootstrapnode.AdminKubeconfigPath)
	if err != nil {
		return fmt.Errorf("%s: %w", in.req.BootstrapIgnitionFileName, err)
	}
	if found {
		in.kubeconfig = kubeconfig
	}
	in.a.opts.Logf("Starting the bootstrap control plane")
	in.bootstrapDone = make(chan error, 1)
	go func() { in.bootstrapDone <- in.a.opts.RunBootstrap(ctx, bootIgn) }()
	return nil
}

// bootstrapFailed returns the bootstrap runner's error once it ended with
// one.
func (in *installation) bootstrapFailed() error {
	if in.bootstrapErr != nil || in.bootstrapDone == nil {
		return in.bootstrapErr
	}
	select {
	case err := <-in.bootstrapDone:
		if err != nil {
			in.bootstrapErr = fmt.Errorf("the bootstrap control plane: %w", err)
		}
		in.bootstrapDone = nil
	default:
	}
	return in.bootstrapErr
}

// write puts the OS image and a config drive with the host's Ignition on
// the installation disk.
func (in *installation) write(ctx context.Context) error {
	info := in.dev.Info()
	in.a.opts.Logf("Writing the OS image to %s", info.Name)
	img := deployapi.Image{URL: in.req.OSImage.URL, Checksum: in.req.OSImage.Checksum, ChecksumType: in.req.OSImage.ChecksumType}
	// The image server may be the hub, away for a restart too: a network
	// error is tried again, for up to ServiceWait; past it, or for any
	// other error, the install fails.
	var n int64
	var last error // the last network error
	err := in.a.retry(ctx, in.a.opts.ServiceWait, "Writing the OS image to "+info.Name, func() error {
		var err error
		n, err = deploy.WriteImage(ctx, in.a.opts.HTTP, in.dev, img)
		switch {
		case err == nil:
		case !networkError(err):
			return final{err}
		case last == nil:
			in.a.opts.Logf("Writing the OS image to %s: %v; trying again", info.Name, err)
			fallthrough
		default:
			last = err
		}
		return err
	})
	if errors.Is(err, errUnreachable) {
		return fmt.Errorf("writing the OS image to %s: the image server did not answer for %s: %w", info.Name, in.a.opts.ServiceWait, last)
	}
	if err != nil {
		return fmt.Errorf("writing the OS image to %s: %w", info.Name, err)
	}
	if last != nil {
		in.a.opts.Logf("Writing the OS image to %s: the image server answered again", info.Name)
	}
	meta := map[string]string{"uuid": in.a.opts.HostID}
	if h := in.req.Hostname; h != "" {
		meta["name"], meta["local-hostname"] = h, h
	}
	metaData, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	if err := deploy.WriteConfigDrive(in.dev, configdrive.Contents{UserData: in.ignition, MetaData: metaData}, in.a.opts.Logf); err != nil {
		return err
	}
	if err := deploy.Flush(in.dev); err != nil {
		return err
	}
	in.a.opts.Logf("Wrote %d bytes of OS image and the config drive to %s", n, info.Name)
	return nil
}

// waitControlPlane waits until the cluster has control_plane_masters
// Ready masters, reporting the count when it changes.
func (in *installation) waitControlPlane(ctx context.Context) error {
	want := in.req.ControlPlaneMasters
	ready := in.a.opts.ControlPlaneReady
	last, lastErr := -1, ""
	for {
		n, err := ready(ctx, in.kubeconfig)
		switch {
		case err != nil:
			if err.Error() != lastErr && ctx.Err() == nil {
				in.a.opts.Logf("Waiting for the control plane: %v", err)
				lastErr = err.Error()
			}
		case n != last:
			last = n
			if err := in.a.progress(ctx, assistedapi.StageWaitingForControlPlane, fmt.Sprintf("%d/%d control plane nodes ready", n, want)); err != nil {
				return err
			}
		}
		if err == nil && n >= want {
			return nil
		}
		if err := in.bootstrapFailed(); err != nil {
			return err
		}
		if !sleep(ctx, in.a.cap(controlPlanePoll)) {
			return ctx.Err()
		}
	}
}
