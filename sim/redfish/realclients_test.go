package redfish

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/machine"
)

// These tests check the emulator with DMTF's redfishtool and OpenStack's
// sushy, the clients real operators and Ironic use, installed from Debian
// by .ci/run.

func requireTool(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: install it with .ci/run (apt-get install redfishtool python3-sushy)", path)
	}
}

func redfishtool(t *testing.T, addr, user, pass string, args ...string) (string, error) {
	t.Helper()
	requireTool(t, "/usr/bin/redfishtool")
	base := []string{"-r", addr, "-S", "Never", "-u", user, "-p", pass, "-T", "5", "-W", "1:2"}
	out, err := exec.Command("/usr/bin/redfishtool", append(base, args...)...).CombinedOutput()
	return string(out), err
}

func TestRedfishtool(t *testing.T) {
	g := NewWithT(t)
	s, ts := startServer(t, 3)
	addr := hostPort(ts)

	out, err := redfishtool(t, addr, "admin", "s3cret-canary", "Systems", "list")
	g.Expect(err).NotTo(HaveOccurred(), out)
	for _, id := range []string{"sys-1", "sys-2", "sys-3"} {
		g.Expect(out).To(ContainSubstring("/redfish/v1/Systems/" + id))
	}

	out, err = redfishtool(t, addr, "admin", "s3cret-canary", "Systems", "-I", "sys-2", "get")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var sys map[string]any
	g.Expect(json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &sys)).To(Succeed(), out)
	g.Expect(sys).To(HaveKeyWithValue("PowerState", "Off"))
	g.Expect(sys["ProcessorSummary"]).To(HaveKeyWithValue("Count", BeNumerically("==", 16)))
	g.Expect(sys["MemorySummary"]).To(HaveKeyWithValue("TotalSystemMemoryGiB", BeNumerically("==", 64)))

	out, err = redfishtool(t, addr, "admin", "s3cret-canary", "Systems", "-I", "sys-2", "EthernetInterfaces", "-i", "eno1")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("52:54:00:00:00:02"))

	for _, step := range []struct {
		reset string
		on    bool
	}{{"On", true}, {"ForceRestart", true}, {"ForceOff", false}} {
		out, err = redfishtool(t, addr, "admin", "s3cret-canary", "Systems", "-I", "sys-2", "reset", step.reset)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(s.Machine("sys-2").PoweredOn()).To(Equal(step.on), step.reset)
	}
	g.Expect(s.Machine("sys-2").Boots()).To(Equal(2), "On and ForceRestart each boot the machine")

	out, err = redfishtool(t, addr, "admin", "s3cret-canary", "Systems", "-I", "sys-1", "setBootOverride", "Once", "Pxe")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(s.Machine("sys-1").Override().Target).To(Equal(machine.BootPxe))

	// redfishtool has no virtual-media verb; operators use raw.
	insert := `{"Image": "http://192.0.2.1/deploy.iso", "Inserted": true, "WriteProtected": true}`
	out, err = redfishtool(t, addr, "admin", "s3cret-canary", "raw", "POST",
		"/redfish/v1/Managers/BMC-sys-3/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", "-d", insert)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(s.Machine("sys-3").Media()).To(Equal("http://192.0.2.1/deploy.iso"))
	out, err = redfishtool(t, addr, "admin", "s3cret-canary", "raw", "GET", "/redfish/v1/Managers/BMC-sys-3/VirtualMedia/Cd")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`"Inserted":\s*true`))
	out, err = redfishtool(t, addr, "admin", "s3cret-canary", "raw", "POST",
		"/redfish/v1/Managers/BMC-sys-3/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", "-d", "{}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(s.Machine("sys-3").Media()).To(BeEmpty())

	out, err = redfishtool(t, addr, "admin", "wrong", "Systems", "list")
	g.Expect(err).To(HaveOccurred(), "wrong credentials are refused")
	g.Expect(out).To(ContainSubstring("401"))
}

const sushyScript = `
import json, sys, time
import sushy
v = lambda x: str(getattr(x, "value", x))
root = sushy.Sushy(sys.argv[1], auth=sushy.auth.SessionOrBasicAuth(username=sys.argv[2], password=sys.argv[3]))
out = {"systems": list(root.get_system_collection().members_identities)}
system = root.get_system("/redfish/v1/Systems/sys-1")
out["power_before"] = v(system.power_state)
system.reset_system(sushy.RESET_ON)
system.refresh()
out["power_after"] = v(system.power_state)
system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_CD, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE, mode=sushy.BOOT_SOURCE_MODE_UEFI)
system.refresh()
out["boot_target"] = v(system.boot.target)
out["cpus"] = system.processors.summary.count if system.processors else None
out["memory_gib"] = system.memory_summary.size_gib
out["macs"] = [n.mac_address for n in system.ethernet_interfaces.get_members()]
out["disks"] = [d.capacity_bytes for st in system.storage.get_members() for d in st.drives]
manager = system.managers[0]
cd = manager.virtual_media.get_member(manager.virtual_media.members_identities[0])
cd.insert_media("http://192.0.2.1/deploy.iso", inserted=True, write_protected=True)
cd.refresh()
out["media_inserted"] = cd.inserted
out["media_image"] = cd.image
cd.eject_media()
cd.refresh()
out["media_after_eject"] = cd.inserted
system.reset_system(sushy.RESET_FORCE_OFF)
system.refresh()
out["power_end"] = v(system.power_state)
print(json.dumps(out))
`

func TestSushy(t *testing.T) {
	g := NewWithT(t)
	requireTool(t, "/usr/bin/python3")
	if err := exec.Command("/usr/bin/python3", "-c", "import sushy").Run(); err != nil {
		t.Fatalf("python3-sushy is missing: install it with .ci/run (apt-get install python3-sushy)")
	}
	s, ts := startServer(t, 2)
	cmd := exec.Command("/usr/bin/python3", "-c", sushyScript, ts.URL+"/redfish/v1", "admin", "s3cret-canary")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("sushy did not finish")
	}
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res map[string]any
	g.Expect(json.Unmarshal([]byte(lines[len(lines)-1]), &res)).To(Succeed(), string(out))
	g.Expect(res["systems"]).To(ConsistOf("/redfish/v1/Systems/sys-1", "/redfish/v1/Systems/sys-2"))
	g.Expect(res["power_before"]).To(Equal("Off"))
	g.Expect(res["power_after"]).To(Equal("On"))
	g.Expect(res["boot_target"]).To(Equal("Cd"))
	g.Expect(res["cpus"]).To(BeNumerically("==", 16))
	g.Expect(res["memory_gib"]).To(BeNumerically("==", 64))
	g.Expect(res["macs"]).To(ConsistOf("52:54:00:00:00:01"))
	g.Expect(res["disks"]).To(ConsistOf(BeNumerically("==", 480<<30)))
	g.Expect(res["media_inserted"]).To(BeTrue())
	g.Expect(res["media_image"]).To(Equal("http://192.0.2.1/deploy.iso"))
	g.Expect(res["media_after_eject"]).To(BeFalse())
	g.Expect(res["power_end"]).To(Equal("Off"))
	g.Expect(s.Machine("sys-1").PoweredOn()).To(BeFalse())
}
