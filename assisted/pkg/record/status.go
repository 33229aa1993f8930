package record

import (
	"bytes"
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// SetInventory records an agent's inventory in status.inventory (the
// REST shape in the CRD's camelCase), keeping the disks' measured speeds,
// and mirrors it into the inventory annotation; false when nothing changed
// but the report time, so a steady host costs no write.
func SetInventory(a *agentinstallv1.Agent, inv *assistedapi.Inventory, now metav1.Time) bool {
	hw := InventoryToCR(inv)
	for i := range hw.Disks {
		for _, old := range a.Status.Inventory.Disks {
			if old.Path == hw.Disks[i].Path {
				hw.Disks[i].IoPerf = old.IoPerf
			}
		}
	}
	old := a.Status.Inventory
	old.ReportTime = nil
	if sameAsStored(old, hw) {
		return false
	}
	hw.ReportTime = &now
	a.Status.Inventory = hw
	return true
}

// sameAsStored tells whether a and b are the same once the API server has
// stored them: as JSON, where an empty list and none are one thing (the
// agent reports "flags": [], an Agent read back has none).
func sameAsStored(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// InventoryToCR converts a REST inventory to the Agent's status.inventory.
func InventoryToCR(inv *assistedapi.Inventory) agentinstallv1.HardwareInventory {
	hw := agentinstallv1.HardwareInventory{
		Hostname: inv.Hostname, BmcAddress: inv.BmcAddress, BmcV6Address: inv.BmcV6Address,
		Memory: agentinstallv1.HostMemory{PhysicalBytes: inv.Memory.PhysicalBytes, UsableBytes: inv.Memory.UsableBytes},
		Cpu: agentinstallv1.HostCPU{Count: inv.CPU.Count, ClockMegahertz: int64(inv.CPU.Frequency), Flags: inv.CPU.Flags,
			ModelName: inv.CPU.ModelName, Architecture: inv.CPU.Architecture},
		Boot: agentinstallv1.HostBoot{CurrentBootMode: inv.Boot.CurrentBootMode, PxeInterface: inv.Boot.PxeInterface, DeviceType: inv.Boot.DeviceType},
		SystemVendor: agentinstallv1.HostSystemVendor{SerialNumber: inv.SystemVendor.SerialNumber, ProductName: inv.SystemVendor.ProductName,
			Manufacturer: inv.SystemVendor.Manufacturer, Virtual: inv.SystemVendor.Virtual},
	}
	for _, n := range inv.Interfaces {
		hw.Interfaces = append(hw.Interfaces, agentinstallv1.HostInterface{
			Name: n.Name, MacAddress: n.MacAddress, IPV4Addresses: n.IPV4Addresses, IPV6Addresses: n.IPV6Addresses,
			HasCarrier: n.HasCarrier, SpeedMbps: n.SpeedMbps, Mtu: n.Mtu, Vendor: n.Vendor, Product: n.Product,
		})
	}
	for _, d := range inv.Disks {
		hw.Disks = append(hw.Disks, agentinstallv1.HostDisk{
			ID: d.ID, Name: d.Name, Path: d.Path, ByPath: d.ByPath, ByID: d.ByID, DriveType: d.DriveType, Hctl: d.Hctl,
			Model: d.Model, Vendor: d.Vendor, Serial: d.Serial, Wwn: d.Wwn, SizeBytes: d.SizeBytes, Bootable: d.Bootable,
			InstallationEligibility: agentinstallv1.HostInstallationEligibility{
				Eligible: d.InstallationEligibility.Eligible, NotEligibleReasons: d.InstallationEligibility.NotEligibleReasons},
		})
	}
	return hw
}

// InventoryFromCR converts status.inventory back to the REST shape, for
// the validations.
func InventoryFromCR(hw *agentinstallv1.HardwareInventory) *assistedapi.Inventory {
	inv := &assistedapi.Inventory{
		Hostname: hw.Hostname, BmcAddress: hw.BmcAddress, BmcV6Address: hw.BmcV6Address,
		Memory: assistedapi.Memory{PhysicalBytes: hw.Memory.PhysicalBytes, UsableBytes: hw.Memory.UsableBytes},
		CPU: assistedapi.CPU{Count: hw.Cpu.Count, Architecture: hw.Cpu.Architecture, ModelName: hw.Cpu.ModelName,
			Frequency: float64(hw.Cpu.ClockMegahertz), Flags: hw.Cpu.Flags},
		Boot: assistedapi.Boot{CurrentBootMode: hw.Boot.CurrentBootMode, PxeInterface: hw.Boot.PxeInterface, DeviceType: hw.Boot.DeviceType},
		SystemVendor: assistedapi.SystemVendor{Manufacturer: hw.SystemVendor.Manufacturer, ProductName: hw.SystemVendor.ProductName,
			SerialNumber: hw.SystemVendor.SerialNumber, Virtual: hw.SystemVendor.Virtual},
	}
	for _, n := range hw.Interfaces {
		inv.Interfaces = append(inv.Interfaces, assistedapi.Interface{Name: n.Name, MacAddress: n.MacAddress,
			IPV4Addresses: n.IPV4Addresses, IPV6Addresses: n.IPV6Addresses, HasCarrier: n.HasCarrier, SpeedMbps: n.SpeedMbps, Mtu: n.Mtu})
	}
	for _, d := range hw.Disks {
		inv.Disks = append(inv.Disks, assistedapi.Disk{ID: d.ID, Name: d.Name, Path: d.Path, DriveType: d.DriveType, SizeBytes: d.SizeBytes,
			Serial: d.Serial, Model: d.Model, Bootable: d.Bootable,
			InstallationEligibility: assistedapi.InstallationEligibility{Eligible: d.InstallationEligibility.Eligible,
				NotEligibleReasons: d.InstallationEligibility.NotEligibleReasons}})
	}
	return inv
}

// SetNTPSources records the time sources' states; false when unchanged.
func SetNTPSources(a *agentinstallv1.Agent, sources []assistedapi.NTPSource) bool {
	var out []agentinstallv1.HostNTPSources
	for _, s := range sources {
		out = append(out, agentinstallv1.HostNTPSources{SourceName: s.SourceName, SourceState: s.SourceState})
	}
	if sameAsStored(a.Status.NtpSources, out) {
		return false
	}
	a.Status.NtpSources = out
	return true
}

// SetDiskSpeed records a disk's fsync time (at least 1 ms, so that 0
// means "not measured").
func SetDiskSpeed(a *agentinstallv1.Agent, path string, ms int64) bool {
	for i := range a.Status.Inventory.Disks {
		d := &a.Status.Inventory.Disks[i]
		if d.Path == path || d.ID == path || "/dev/"+d.Name == path {
			d.IoPerf.SyncDurationMilliseconds = max(ms, 1)
			return true
		}
	}
	return false
}

// SetStage records a progress report; false when it repeats the current one.
func SetStage(a *agentinstallv1.Agent, stage assistedapi.HostStage, info string, stages []assistedapi.HostStage, pct int64, now metav1.Time) bool {
	p := &a.Status.Progress
	if p.CurrentStage == string(stage) && p.ProgressInfo == info {
		return false
	}
	if p.CurrentStage != string(stage) {
		p.StageStartTime = &now
	}
	p.CurrentStage, p.ProgressInfo, p.StageUpdateTime = string(stage), info, &now
	p.ProgressStages = p.ProgressStages[:0]
	for _, s := range stages {
		p.ProgressStages = append(p.ProgressStages, string(s))
	}
	if pct > p.InstallationPercentage {
		p.InstallationPercentage = pct
	}
	return true
}

// MirrorAnnotations writes the upstream state annotations of an Agent
// (agent.agent-install.openshift.io/state, role, inventory,
// validations-info, current-stage); false when unchanged.
func MirrorAnnotations(a *agentinstallv1.Agent) bool {
	want := map[string]string{
		agentinstallv1.AgentStateAnnotation:        a.Status.DebugInfo.State,
		agentinstallv1.AgentRoleAnnotation:         Role(a),
		agentinstallv1.AgentCurrentStageAnnotation: a.Status.Progress.CurrentStage,
	}
	if inv, err := json.Marshal(a.Status.Inventory); err == nil && a.Status.Inventory.ReportTime != nil {
		want[agentinstallv1.AgentInventoryAnnotation] = string(inv)
	}
	if v, err := json.Marshal(a.Status.ValidationsInfo); err == nil && len(a.Status.ValidationsInfo) > 0 {
		want[agentinstallv1.AgentValidationsInfoAnnotation] = string(v)
	}
	changed := false
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	for k, v := range want {
		if strings.TrimSpace(v) == "" {
			if _, ok := a.Annotations[k]; ok {
				delete(a.Annotations, k)
				changed = true
			}
			continue
		}
		if a.Annotations[k] != v {
			a.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// DomainResolutionsAnnotation holds the host's last domain-resolution
// answers as JSON, {"<name>": true|false}: whether the name resolved. The
// Agent has no status field for them, and its DNS validations read them.
const DomainResolutionsAnnotation = "metalshift.io/domain-resolutions"

// DomainResolutions is what the domain-resolution step answered: each
// name and whether it has an address.
func DomainResolutions(resp *assistedapi.DomainResolutionResponse) map[string]bool {
	out := make(map[string]bool, len(resp.Resolutions))
	for _, r := range resp.Resolutions {
		out[r.DomainName] = len(r.IPV4Addresses)+len(r.IPV6Addresses) > 0
	}
	return out
}

// DomainsResolved reads DomainResolutionsAnnotation; nil when absent or
// unreadable.
func DomainsResolved(a *agentinstallv1.Agent) map[string]bool {
	raw, ok := a.Annotations[DomainResolutionsAnnotation]
	if !ok {
		return nil
	}
	out := map[string]bool{}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil
	}
	return out
}
