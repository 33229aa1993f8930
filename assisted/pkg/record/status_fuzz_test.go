package record

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
)

// inventorySeed is an inventory as the upstream agent reports it: empty
// lists are sent as [].
const inventorySeed = `{"hostname":"master-0","bmc_address":"0.0.0.0","bmc_v6address":"::/0",` +
	`"memory":{"physical_bytes":17179869184,"usable_bytes":16747839488},` +
	`"cpu":{"count":8,"architecture":"x86_64","model_name":"Intel Xeon","frequency":2095.078,"flags":["fpu","vme"]},` +
	`"interfaces":[{"name":"ens3","mac_address":"52:54:00:aa:bb:01","ipv4_addresses":["192.168.111.20/24"],"ipv6_addresses":[],` +
	`"has_carrier":true,"speed_mbps":1000,"mtu":1500,"vendor":"0x1af4","product":"0x0001","type":"physical","flags":[]}],` +
	`"disks":[{"id":"/dev/disk/by-id/wwn-0x5000","name":"vda","path":"/dev/vda","by_path":"/dev/disk/by-path/pci-0000:00:05.0",` +
	`"drive_type":"HDD","model":"","vendor":"0x1af4","serial":"","size_bytes":128849018880,"bootable":false,` +
	`"installation_eligibility":{"eligible":true,"not_eligible_reasons":[]}},` +
	`{"name":"sr0","path":"/dev/sr0","drive_type":"ODD","size_bytes":1073741824,"installation_eligibility":{"eligible":false,"not_eligible_reasons":["Disk is removable"]}}],` +
	`"boot":{"current_boot_mode":"uefi","pxe_interface":""},` +
	`"system_vendor":{"manufacturer":"Red Hat","product_name":"KVM","serial_number":"","virtual":true},` +
	`"routes":[{"interface":"ens3","destination":"0.0.0.0","gateway":"192.168.111.1","family":2}],"timestamp":1700000000}`

func stepReply(t testing.TB, st assistedapi.StepType, output string) []byte {
	data, err := json.Marshal(assistedapi.StepReply{StepType: st, StepID: string(st) + "-1a2b3c4d", Output: output})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// stored is the Agent as the API server hands it back after a write.
func stored(t *testing.T, a *agentinstallv1.Agent) *agentinstallv1.Agent {
	t.Helper()
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	out := &agentinstallv1.Agent{}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("the Agent does not read back: %v", err)
	}
	return out
}

// FuzzStepReply decodes a step reply as the agent service does (POST
// .../instructions/{step}: a StepReply whose output is the step's
// response) and applies it to an Agent as the service does, checking what
// the hub depends on: a reply recorded once is recorded as it was sent (the
// Agent status holds it after the API server stored it), and the same
// reply again, against the stored Agent, changes nothing, so that a steady
// host costs no write; an inventory keeps the disks' measured speeds.
func FuzzStepReply(f *testing.F) {
	f.Add(stepReply(f, assistedapi.StepInventory, inventorySeed))
	f.Add(stepReply(f, assistedapi.StepInventory, `{"hostname":"h","cpu":{"flags":[]},"interfaces":[],"disks":[{"path":"/dev/sda","size_bytes":1}]}`))
	f.Add(stepReply(f, assistedapi.StepInventory, `{"cpu":{"frequency":1e300}}`))
	f.Add(stepReply(f, assistedapi.StepInventory, `null`))
	f.Add(stepReply(f, assistedapi.StepNTPSynchronizer, `{"ntp_sources":[{"source_name":"clock.redhat.com","source_state":"synced"},{"source_name":"10.0.0.1","source_state":"unreachable"}]}`))
	f.Add(stepReply(f, assistedapi.StepNTPSynchronizer, `{"ntp_sources":[]}`))
	f.Add(stepReply(f, assistedapi.StepInstallationDiskSpeedCheck, `{"path":"/dev/sda","io_sync_duration":12}`))
	f.Add(stepReply(f, assistedapi.StepInstallationDiskSpeedCheck, `{"path":"/dev/sda","io_sync_duration":-5}`))
	f.Add(stepReply(f, assistedapi.StepDomainResolution, `{"resolutions":[{"domain_name":"api.c.example.com","ipv4_addresses":["192.0.2.10"],"ipv6_addresses":[]},{"domain_name":"api-int.c.example.com"}]}`))
	f.Add([]byte(`{"step_type":"inventory","output":"{\"hostname\":\"x\"}","exit_code":0} trailing`))
	f.Add([]byte(`{"step_type":"inventory","exit_code":1,"error":"boom"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var rep assistedapi.StepReply
		if err := json.NewDecoder(bytes.NewReader(body)).Decode(&rep); err != nil || rep.ExitCode != 0 {
			return // 400, or a failed step, which changes nothing
		}
		a := &agentinstallv1.Agent{}
		a.Status.Inventory.Disks = []agentinstallv1.HostDisk{{Path: "/dev/sda", IoPerf: agentinstallv1.HostIOPerf{SyncDurationMilliseconds: 7}}}
		now := metav1.NewTime(time.Unix(1_800_000_000, 0))
		later := metav1.NewTime(now.Add(time.Minute))
		var apply func(a *agentinstallv1.Agent, at metav1.Time) bool
		switch rep.StepType {
		case assistedapi.StepInventory:
			inv := &assistedapi.Inventory{}
			if json.Unmarshal([]byte(rep.Output), inv) != nil {
				return
			}
			apply = func(a *agentinstallv1.Agent, at metav1.Time) bool { return SetInventory(a, inv, at) }
		case assistedapi.StepNTPSynchronizer:
			resp := &assistedapi.NTPSynchronizationResponse{}
			if json.Unmarshal([]byte(rep.Output), resp) != nil {
				return
			}
			apply = func(a *agentinstallv1.Agent, _ metav1.Time) bool { return SetNTPSources(a, resp.NTPSources) }
		case assistedapi.StepInstallationDiskSpeedCheck:
			resp := &assistedapi.DiskSpeedCheckResponse{}
			if json.Unmarshal([]byte(rep.Output), resp) != nil {
				return
			}
			if SetDiskSpeed(a, resp.Path, resp.IoSyncDuration) && a.Status.Inventory.Disks[0].IoPerf.SyncDurationMilliseconds < 1 {
				t.Fatalf("%s: a measured disk speed reads as not measured: %+v", body, a.Status.Inventory.Disks[0].IoPerf)
			}
			return
		case assistedapi.StepDomainResolution:
			resp := &assistedapi.DomainResolutionResponse{}
			if json.Unmarshal([]byte(rep.Output), resp) != nil {
				return
			}
			resolved := DomainResolutions(resp)
			data, err := json.Marshal(resolved)
			if err != nil {
				t.Fatal(err)
			}
			a.Annotations = map[string]string{DomainResolutionsAnnotation: string(data)}
			if got := DomainsResolved(stored(t, a)); len(got) != len(resolved) {
				t.Fatalf("%s: the domain resolutions %v read back as %v", body, resolved, got)
			}
			return
		default:
			return
		}
		apply(a, now)
		MirrorAnnotations(a)
		first := stored(t, a)
		if !sameAsStored(first.Status, a.Status) {
			t.Fatalf("%s: the status does not survive the API server:\n%s\n%s", body, mustJSON(t, a.Status), mustJSON(t, first.Status))
		}
		if rep.StepType == assistedapi.StepInventory && first.Status.Inventory.Disks != nil {
			for _, d := range first.Status.Inventory.Disks {
				if d.Path == "/dev/sda" && d.IoPerf.SyncDurationMilliseconds != 7 {
					t.Fatalf("%s: the inventory drops /dev/sda's measured speed: %+v", body, d)
				}
			}
		}
		if apply(first, later) {
			t.Fatalf("%s: the same reply again changes the stored Agent: a steady host writes at every report", body)
		}
		if MirrorAnnotations(first) {
			t.Fatalf("%s: the annotations mirrored from the stored Agent change again", body)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// FuzzProgress plays a host's progress reports (PUT .../progress: one
// HostProgress per line of reports) as the agent service takes them:
// decoded, refused unless hoststate.StageAllowed, else recorded with
// SetStage. A host's recorded stage is always one of its role's stages or
// Failed, its installation percentage never goes down, and a report that
// repeats the recorded one changes nothing.
func FuzzProgress(f *testing.F) {
	f.Add(uint8(0), false, false, []byte(`{"current_stage":"Starting installation"}
{"current_stage":"Installing","progress_info":"1%"}
{"current_stage":"Writing image to disk","progress_info":"52%"}
{"current_stage":"Writing image to disk","progress_info":"52%"}
{"current_stage":"Rebooting"}
{"current_stage":"Configuring"}
{"current_stage":"Joined"}
{"current_stage":"Done"}`))
	f.Add(uint8(2), true, false, []byte(`{"current_stage":"Starting installation"}
{"current_stage":"Waiting for control plane"}
{"current_stage":"Installing"}
{"current_stage":"Starting installation"}
{"current_stage":"Failed","progress_info":"boom"}
{"current_stage":"Installing"}`))
	f.Add(uint8(1), false, true, []byte(`{"current_stage":"Done"}
{"current_stage":"Rebooting"}
{"current_stage":""}
{"current_stage":"Nope"}
not json`))
	f.Fuzz(func(t *testing.T, roleN uint8, bootstrap, sno bool, reports []byte) {
		role := []string{"master", "worker", "bootstrap", "arbiter", "auto-assign", ""}[int(roleN)%6]
		stages := hoststate.Stages(role, bootstrap, sno)
		a := &agentinstallv1.Agent{}
		now := metav1.NewTime(time.Unix(1_800_000_000, 0))
		for i, line := range bytes.Split(reports, []byte("\n")) {
			var p assistedapi.HostProgress
			if json.Unmarshal(line, &p) != nil || p.CurrentStage == "" {
				continue // 400
			}
			current := assistedapi.HostStage(a.Status.Progress.CurrentStage)
			if hoststate.StageAllowed(role, bootstrap, sno, current, p.CurrentStage) != nil {
				continue // 400
			}
			before := a.Status.Progress
			repeat := before.CurrentStage == string(p.CurrentStage) && before.ProgressInfo == p.ProgressInfo
			at := metav1.NewTime(now.Add(time.Duration(i) * time.Second))
			changed := SetStage(a, p.CurrentStage, p.ProgressInfo, stages, hoststate.Percentage(role, bootstrap, sno, p.CurrentStage), at)
			if changed == repeat {
				t.Fatalf("report %d %+v (recorded %+v): changed %v", i, p, before, changed)
			}
			got := a.Status.Progress
			if got.CurrentStage != string(assistedapi.StageFailed) && !slices.Contains(stages, assistedapi.HostStage(got.CurrentStage)) {
				t.Fatalf("a %s host (bootstrap %v, sno %v) is recorded in stage %q", role, bootstrap, sno, got.CurrentStage)
			}
			if got.InstallationPercentage < before.InstallationPercentage || got.InstallationPercentage > 100 {
				t.Fatalf("report %d %+v: the percentage goes from %d to %d", i, p, before.InstallationPercentage, got.InstallationPercentage)
			}
			a = stored(t, a)
		}
	})
}
