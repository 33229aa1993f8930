package main

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/host"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// agentBin builds the agent as `make images` will: CGO off.
func agentBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "metalshift-agent")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	return bin
}

// TestAgentBinary: one static binary — no program interpreter, no shared
// library — that runs in an initramfs with nothing else; its inventory of
// this machine agrees with the kernel's; usage and configuration errors
// say what is wrong, with exit codes 2 and 1.
func TestAgentBinary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	g := NewWithT(t)
	bin := agentBin(t)

	f, err := elf.Open(bin)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	for _, p := range f.Progs {
		g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "a static binary has no program interpreter")
	}
	libs, err := f.ImportedLibraries()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(libs).To(BeEmpty())

	out, err := exec.Command(bin, "inventory").Output()
	g.Expect(err).NotTo(HaveOccurred())
	var inv host.Inventory
	g.Expect(json.Unmarshal(out, &inv)).To(Succeed(), "%s", out)
	g.Expect(inv.CPU.Count).To(BeNumerically(">=", runtime.NumCPU()))
	g.Expect(inv.MemoryBytes).To(BeNumerically(">", 0))
	g.Expect(inv.BootMode).To(BeElementOf(host.BootModeUEFI, host.BootModeLegacy))

	exitCode := func(err error) int {
		var exit *exec.ExitError
		g.Expect(errors.As(err, &exit)).To(BeTrue(), "%v", err)
		return exit.ExitCode()
	}
	out, err = exec.Command(bin, "dance").CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(2))
	g.Expect(string(out)).To(ContainSubstring(`unknown role "dance": deploy, discovery, metalcloud or inventory`))

	// No boot configuration: the base image booted as is.
	out, err = exec.Command(bin, "--config", deployapi.BootConfigFile, "deploy").CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("this image was booted without a host's configuration"))

	cfg := filepath.Join(t.TempDir(), "deploy.cfg")
	g.Expect(os.WriteFile(cfg, []byte(`{"engineURL":"http://127.0.0.1:1"}`), 0o644)).To(Succeed())
	out, err = exec.Command(bin, "--config", cfg).CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("engineURL, hostID and ticket are required"))

	// A discovery image's configuration.
	g.Expect(os.WriteFile(cfg, []byte(`{"discovery":{"serviceURL":"http://127.0.0.1:1","infraEnvID":"ie"}}`), 0o644)).To(Succeed())
	out, err = exec.Command(bin, "--config", cfg).CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("discovery.serviceURL, discovery.infraEnvID and discovery.token are required"))
	g.Expect(os.WriteFile(cfg, []byte(`{"discovery":{"serviceURL":"http://127.0.0.1:1","infraEnvID":"ie","token":"t"}}`), 0o644)).To(Succeed())
	out, err = exec.Command(bin, "--config", cfg, "deploy").CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("is a discovery image's configuration: run the discovery role"))
	g.Expect(os.WriteFile(cfg, []byte(`{"engineURL":"http://127.0.0.1:1","hostID":"h","ticket":"t"}`), 0o644)).To(Succeed())
	out, err = exec.Command(bin, "--config", cfg, "discovery").CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("has no discovery section: run the deploy role"))

	// A converged-flow image's configuration: a lookup section.
	g.Expect(os.WriteFile(cfg, []byte(`{"lookup":{"engineURL":"http://127.0.0.1:1","scope":"/i.iso"}}`), 0o644)).To(Succeed())
	out, err = exec.Command(bin, "--config", cfg).CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("lookup.engineURL, lookup.scope and lookup.token are required"))

	// A metal cloud's installer: it reads the metadata service and applies
	// the network with netlink, before anything else goes over the network.
	// No NIC of this machine has the metadata's MAC addresses, so it stops
	// there, having changed nothing.
	var mdCalls, userdataCalls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metadata", func(w http.ResponseWriter, _ *http.Request) {
		mdCalls.Add(1)
		_, _ = w.Write([]byte(`{"id":"7f3c2a10-5b4e-4c1d-9e2f-0a1b2c3d4e5f","hostname":"worker-0","network":{"bonding":{"mode":4},` +
			`"interfaces":[{"name":"eth0","mac":"02:4d:ff:00:00:01","bond":"bond0"}],` +
			`"addresses":[{"address_family":4,"public":true,"management":true,"enabled":true,"address":"198.51.100.3","gateway":"198.51.100.2","cidr":31}]}}`))
	})
	mux.HandleFunc("GET /userdata", func(http.ResponseWriter, *http.Request) { userdataCalls.Add(1) })
	md := httptest.NewServer(mux)
	defer md.Close()
	g.Expect(os.WriteFile(cfg, []byte(`{"metalCloud":{"metadataURL":"`+md.URL+`","image":{"url":"http://127.0.0.1:1/os.img"}}}`), 0o644)).To(Succeed())
	out, err = exec.Command(bin, "--config", cfg, "deploy").CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("is a metal cloud installer's configuration: run the metalcloud role"))
	g.Expect(mdCalls.Load()).To(BeZero())
	out, err = exec.Command(bin, "--config", cfg).CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("This is device 7f3c2a10-5b4e-4c1d-9e2f-0a1b2c3d4e5f (worker-0)"))
	g.Expect(string(out)).To(ContainSubstring("configuring bond0: no NIC has any of the MAC addresses 02:4d:ff:00:00:01"))
	g.Expect(mdCalls.Load()).To(Equal(int32(1)))
	g.Expect(userdataCalls.Load()).To(BeZero(), "nothing is read before the network is configured")
	_, err = net.InterfaceByName("bond0")
	g.Expect(err).To(HaveOccurred(), "no bond was made")

	g.Expect(os.WriteFile(cfg, []byte(`{"metalCloud":{"image":{"url":"http://127.0.0.1:1/os.img"}}}`), 0o644)).To(Succeed())
	out, err = exec.Command(bin, "--config", cfg, "metalcloud").CombinedOutput()
	g.Expect(exitCode(err)).To(Equal(1))
	g.Expect(string(out)).To(ContainSubstring("metalCloud.metadataURL and metalCloud.image.url are required"))
}
