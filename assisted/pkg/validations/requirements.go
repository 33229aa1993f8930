package validations

import (
	"fmt"
	"strconv"
	"strings"
)

// Requirements are the hardware minimums and network thresholds of a role,
// as in upstream's default_controller_hw_requirements.json.
type Requirements struct {
	CPUCores                         int64
	RAMMiB                           int64
	DiskSizeGB                       int64
	InstallationDiskSpeedThresholdMs int64
	// NetworkLatencyThresholdMs and PacketLossPercentage are 0 where the
	// role has none (single node).
	NetworkLatencyThresholdMs int64
	PacketLossPercentage      float64
}

var (
	reqMaster  = Requirements{CPUCores: 4, RAMMiB: 16384, DiskSizeGB: 100, InstallationDiskSpeedThresholdMs: 10, NetworkLatencyThresholdMs: 100, PacketLossPercentage: 0}
	reqArbiter = Requirements{CPUCores: 2, RAMMiB: 8192, DiskSizeGB: 50, InstallationDiskSpeedThresholdMs: 10, NetworkLatencyThresholdMs: 1000, PacketLossPercentage: 0}
	reqWorker  = Requirements{CPUCores: 2, RAMMiB: 8192, DiskSizeGB: 100, InstallationDiskSpeedThresholdMs: 10, NetworkLatencyThresholdMs: 1000, PacketLossPercentage: 10}
	reqSNO     = Requirements{CPUCores: 8, RAMMiB: 16384, DiskSizeGB: 100, InstallationDiskSpeedThresholdMs: 10}
)

// snoFewerCoresFrom is the first OpenShift release whose single node needs
// only snoCoresFrom422 cores.
const (
	snoFewerCoresMajor, snoFewerCoresMinor = 4, 22
	snoCoresFrom422                        = 4
)

// RequirementsFor returns the minimums of a role: master (or bootstrap),
// worker or arbiter; sno selects the single-node entry for the control
// plane; "" or auto-assign is the smallest over master and worker, the
// figure has-min-* compares with (its thresholds are the worker's). version
// is the OpenShift version, e.g. "4.22" or "4.21.3": a single node needs 8
// cores before 4.22 and 4 from 4.22 on (an unparsable version counts as
// older).
func RequirementsFor(role string, sno bool, version string) Requirements {
	master := reqMaster
	if sno {
		master = reqSNO
		if atLeast(version, snoFewerCoresMajor, snoFewerCoresMinor) {
			master.CPUCores = snoCoresFrom422
		}
	}
	switch role {
	case RoleMaster, RoleBootstrap:
		return master
	case RoleWorker:
		return reqWorker
	case RoleArbiter:
		return reqArbiter
	}
	out := reqWorker
	out.CPUCores = min(master.CPUCores, reqWorker.CPUCores)
	out.RAMMiB = min(master.RAMMiB, reqWorker.RAMMiB)
	out.DiskSizeGB = min(master.DiskSizeGB, reqWorker.DiskSizeGB)
	return out
}

// atLeast tells whether version (e.g. "v4.22.0-rc.1") is major.minor or
// later.
func atLeast(version string, major, minor int) bool {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || maj == major && mnr >= minor
}

// Byte sizes.
const (
	kib = int64(1) << (10 * (iota + 1))
	mib
	gib
	tib
)

// bytesString renders a size the way upstream's messages do: two decimals
// from GiB up, whole MiB or KiB below.
func bytesString(b int64) string {
	switch {
	case b >= tib:
		return fmt.Sprintf("%.2f TiB", float64(b)/float64(tib))
	case b >= gib:
		return fmt.Sprintf("%.2f GiB", float64(b)/float64(gib))
	case b >= mib:
		return fmt.Sprintf("%d MiB", b/mib)
	case b >= kib:
		return fmt.Sprintf("%d KiB", b/kib)
	}
	return fmt.Sprintf("%d bytes", b)
}
