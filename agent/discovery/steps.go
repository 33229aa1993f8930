package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/metalshift/metalshift/agent/deploy"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// errUnsupported is the error of a step type this agent does not run;
// its reply's exit code is -1.
var errUnsupported = errors.New("not supported by this agent")

// runStep runs one instruction and replies to it. After a successful
// install it reboots the machine: rebooted is then true, or err tells why
// the reboot failed.
func (a *agent) runStep(ctx context.Context, st assistedapi.Step) (rebooted bool, err error) {
	a.opts.Logf("Step %s (%s)", st.StepType, st.StepID)
	var out any
	var stepErr error
	if st.StepType == assistedapi.StepInstall {
		hbCtx, stop := context.WithCancel(ctx)
		hbDone := make(chan struct{})
		go func() { defer close(hbDone); a.heartbeat(hbCtx, a.interval()) }()
		stepErr = a.install(ctx, st.Args)
		stop()
		<-hbDone
	} else {
		out, stepErr = a.step(ctx, st)
	}
	if ctx.Err() != nil {
		return false, nil
	}
	if errors.Is(stepErr, errUnreachable) {
		// No reply: the service hands the step out again when it is back.
		a.opts.Logf("Step %s (%s) left: %v", st.StepType, st.StepID, stepErr)
		return false, nil
	}
	reply := assistedapi.StepReply{StepType: st.StepType, StepID: st.StepID}
	switch {
	case errors.Is(stepErr, errUnsupported):
		reply.ExitCode, reply.Error = -1, fmt.Sprintf("step type %s is not supported by this agent", st.StepType)
		a.opts.Logf("Step %s (%s) failed: %s", st.StepType, st.StepID, reply.Error)
	case stepErr != nil:
		reply.ExitCode, reply.Error = 1, stepErr.Error()
		a.opts.Logf("Step %s (%s) failed: %v", st.StepType, st.StepID, stepErr)
	case out != nil:
		data, err := json.Marshal(out)
		if err != nil {
			reply.ExitCode, reply.Error = 1, fmt.Sprintf("encoding the output: %v", err)
			break
		}
		reply.Output = string(data)
	}
	a.reply(ctx, reply)
	if st.StepType != assistedapi.StepInstall || stepErr != nil {
		return false, nil
	}
	a.opts.Logf("Installation done")
	if err := a.opts.Reboot(ctx); err != nil {
		err = fmt.Errorf("rebooting after the installation: %w", err)
		_ = a.progress(ctx, assistedapi.StageFailed, err.Error())
		return false, err
	}
	return true, nil
}

// step runs a step other than install and returns its output.
func (a *agent) step(ctx context.Context, st assistedapi.Step) (any, error) {
	switch st.StepType {
	case assistedapi.StepInventory:
		if a.opts.Inventory == nil {
			return nil, errors.New("this agent cannot read the machine's inventory")
		}
		return a.opts.Inventory()
	case assistedapi.StepConnectivityCheck:
		var req assistedapi.ConnectivityCheckParams
		if err := stepArgs(st, &req); err != nil {
			return nil, err
		}
		return connectivityCheck(req), nil
	case assistedapi.StepNTPSynchronizer:
		var req assistedapi.NTPSynchronizationRequest
		if err := stepArgs(st, &req); err != nil {
			return nil, err
		}
		return a.ntpSynchronizer(ctx, req), nil
	case assistedapi.StepDomainResolution:
		var req assistedapi.DomainResolutionRequest
		if err := stepArgs(st, &req); err != nil {
			return nil, err
		}
		return domainResolution(ctx, req, a.lookup), nil
	case assistedapi.StepInstallationDiskSpeedCheck:
		var req assistedapi.DiskSpeedCheckRequest
		if err := stepArgs(st, &req); err != nil {
			return nil, err
		}
		return a.diskSpeedCheck(req)
	case assistedapi.StepStopInstallation, assistedapi.StepLogsGather:
		// Nothing runs besides the step at hand, and no logs are uploaded.
		return nil, nil
	}
	return nil, errUnsupported
}

// stepArgs decodes a step's request: its last argument, a JSON document
// (upstream passes a command line ending with it).
func stepArgs(st assistedapi.Step, v any) error {
	if len(st.Args) == 0 {
		return fmt.Errorf("step %s has no arguments: want its request (JSON)", st.StepType)
	}
	if err := json.Unmarshal([]byte(st.Args[len(st.Args)-1]), v); err != nil {
		return fmt.Errorf("step %s: decoding its request: %w", st.StepType, err)
	}
	return nil
}

// connectivityCheck tells, for each peer address, whether this host has a
// route to it: a UDP "connection" only looks the route up, it sends
// nothing. Round trip times and loss are not measured (0).
func connectivityCheck(req assistedapi.ConnectivityCheckParams) assistedapi.ConnectivityReport {
	rep := assistedapi.ConnectivityReport{RemoteHosts: []assistedapi.ConnectivityRemoteHost{}}
	for _, h := range req {
		rh := assistedapi.ConnectivityRemoteHost{HostID: h.HostID, L3Connectivity: []assistedapi.L3Connectivity{}}
		for _, nic := range h.Nics {
			for _, addr := range nic.IPAddresses {
				rh.L3Connectivity = append(rh.L3Connectivity, assistedapi.L3Connectivity{RemoteIPAddress: addr, Successful: routable(addr)})
			}
		}
		rep.RemoteHosts = append(rep.RemoteHosts, rh)
	}
	return rep
}

// routable tells whether addr (an IP, or an IP/prefix) is an address this
// host has a route to.
func routable(addr string) bool {
	if ip, _, err := net.ParseCIDR(addr); err == nil {
		addr = ip.String()
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		return false
	}
	c, err := net.Dial("udp", net.JoinHostPort(ip.String(), "9"))
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// resolveTimeout bounds each name lookup of the checks.
const resolveTimeout = 2 * time.Second

// ntpSynchronizer reports the request's and the InfraEnv's time sources:
// synced when the name is an address or resolves, unreachable otherwise.
// The live environment runs no NTP client to ask.
func (a *agent) ntpSynchronizer(ctx context.Context, req assistedapi.NTPSynchronizationRequest) assistedapi.NTPSynchronizationResponse {
	resp := assistedapi.NTPSynchronizationResponse{NTPSources: []assistedapi.NTPSource{}}
	seen := map[string]bool{}
	for _, s := range append(strings.Split(req.NTPSource, ","), a.opts.Config.NTPSources...) {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		state := assistedapi.NTPSourceUnreachable
		if net.ParseIP(s) != nil || len(a.lookup(ctx, s)) > 0 {
			state = assistedapi.NTPSourceSynced
		}
		resp.NTPSources = append(resp.NTPSources, assistedapi.NTPSource{SourceName: s, SourceState: state})
	}
	return resp
}

// domainResolution resolves each name of the request; a name that does
// not resolve has empty address lists.
func domainResolution(ctx context.Context, req assistedapi.DomainResolutionRequest, lookup func(context.Context, string) []net.IP) assistedapi.DomainResolutionResponse {
	resp := assistedapi.DomainResolutionResponse{Resolutions: []assistedapi.DomainResolution{}}
	for _, d := range req.Domains {
		r := assistedapi.DomainResolution{DomainName: d.DomainName, IPV4Addresses: []string{}, IPV6Addresses: []string{}}
		for _, ip := range lookup(ctx, d.DomainName) {
			if ip.To4() != nil {
				r.IPV4Addresses = append(r.IPV4Addresses, ip.String())
			} else {
				r.IPV6Addresses = append(r.IPV6Addresses, ip.String())
			}
		}
		resp.Resolutions = append(resp.Resolutions, r)
	}
	return resp
}

// lookup resolves name with Options.Lookup, else the system's resolver.
func (a *agent) lookup(ctx context.Context, name string) []net.IP {
	if a.opts.Lookup != nil {
		return a.opts.Lookup(ctx, name)
	}
	return SystemLookup(ctx, name)
}

// SystemLookup resolves name with the system's resolver; nil when it does
// not.
func SystemLookup(ctx context.Context, name string) []net.IP {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, name)
	if err != nil {
		return nil
	}
	ips := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		ips = append(ips, a.IP)
	}
	return ips
}

// Disk speed check: the block written, where, and how often.
const (
	speedCheckBlock  = 4 << 10
	speedCheckOffset = 1 << 20 // before the end of the disk
	speedCheckWrites = 10
)

// diskSpeedCheck times synchronous 4 KiB writes to the installation disk,
// 1 MiB before its end (where no image or partition table lives before
// the install), and restores what was there. It reports the median write
// in ms, rounded up: upstream reports a percentile of many fio fdatasync
// times; of ten writes the slowest is one pause of the machine (a busy
// CPU, a garbage collection) as often as the disk's speed, and one
// measurement over the threshold keeps the host from installing.
func (a *agent) diskSpeedCheck(req assistedapi.DiskSpeedCheckRequest) (*assistedapi.DiskSpeedCheckResponse, error) {
	dev, err := a.device(req.Path)
	if err != nil {
		return nil, err
	}
	info := dev.Info()
	off := (info.SizeBytes - speedCheckOffset) / speedCheckBlock * speedCheckBlock
	if off < 0 {
		return nil, fmt.Errorf("%s (%d bytes) is too small for a speed check", req.Path, info.SizeBytes)
	}
	orig := make([]byte, speedCheckBlock)
	if _, err := dev.ReadAt(orig, off); err != nil {
		return nil, fmt.Errorf("reading %s: %w", req.Path, err)
	}
	block := make([]byte, speedCheckBlock)
	took := make([]time.Duration, 0, speedCheckWrites)
	for i := range speedCheckWrites {
		for j := range block {
			block[j] = byte(i + j)
		}
		start := time.Now()
		if _, err := dev.WriteAt(block, off); err != nil {
			return nil, errors.Join(fmt.Errorf("writing %s: %w", req.Path, err), restore(dev, orig, off))
		}
		if err := deploy.Flush(dev); err != nil {
			return nil, errors.Join(err, restore(dev, orig, off))
		}
		took = append(took, time.Since(start))
	}
	if err := restore(dev, orig, off); err != nil {
		return nil, err
	}
	slices.Sort(took)
	median := took[len(took)/2]
	ms := int64((median + time.Millisecond - 1) / time.Millisecond)
	return &assistedapi.DiskSpeedCheckResponse{Path: req.Path, IoSyncDuration: ms}, nil
}

// restore puts back what the speed check overwrote.
func restore(dev deploy.BlockDevice, orig []byte, off int64) error {
	if _, err := dev.WriteAt(orig, off); err != nil {
		return fmt.Errorf("restoring %s after the speed check: %w", dev.Info().Name, err)
	}
	return deploy.Flush(dev)
}

// device returns the disk at path: /dev/<name>, or the device's name.
func (a *agent) device(path string) (deploy.BlockDevice, error) {
	for _, d := range a.opts.Devices {
		name := d.Info().Name
		if path != "" && (name == path || "/dev/"+name == path) {
			return d, nil
		}
	}
	names := make([]string, 0, len(a.opts.Devices))
	for _, d := range a.opts.Devices {
		names = append(names, d.Info().Name)
	}
	return nil, fmt.Errorf("no disk %q on this host (disks: %s)", path, strings.Join(names, ", "))
}
