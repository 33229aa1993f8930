package imageservice

import (
	"testing"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// TestParseIPXEScript: the kernel, initrd and kernel arguments the
// simulated firmware boots, from scripts as DeployIPXEScript writes them and
// as a person might; what is not a bootable script says why.
func TestParseIPXEScript(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		want    IPXEBoot
		wantErr string
	}{{
		name:   "as DeployIPXEScript writes it",
		script: DeployIPXEScript("http://e/images/vmlinuz", "http://e/images/initrd", deployapi.BootConfig{EngineURL: "https://10.0.0.1:6385", HostID: "ns~h~abc", Token: "123.sig"}),
		want: IPXEBoot{KernelURL: "http://e/images/vmlinuz", InitrdURL: "http://e/images/initrd", Args: map[string]string{
			"initrd": "initrd", ArgEngine: "https://10.0.0.1:6385", ArgHost: "ns~h~abc", ArgToken: "123.sig", "console": "ttyS0",
		}},
	}, {
		name:   "by hand: CRLF, comments, blank lines, a plain initrd, flags without a value",
		script: "#!ipxe\r\n# deploy\r\n\r\nkernel http://e/k quiet a=b=c\r\ninitrd http://e/i\r\nboot\r\n",
		want:   IPXEBoot{KernelURL: "http://e/k", InitrdURL: "http://e/i", Args: map[string]string{"a": "b=c"}},
	}, {
		name:   "no initrd",
		script: "#!ipxe\nkernel http://e/k console=ttyS0\nboot\n",
		want:   IPXEBoot{KernelURL: "http://e/k", Args: map[string]string{"console": "ttyS0"}},
	}, {
		name:    "no shebang",
		script:  "kernel http://e/k\nboot\n",
		wantErr: "not an iPXE script",
	}, {
		name:    "empty",
		script:  "",
		wantErr: "not an iPXE script",
	}, {
		name:    "no kernel",
		script:  "#!ipxe\ninitrd http://e/i\nboot\n",
		wantErr: "the iPXE script loads no kernel",
	}, {
		name:    "kernel without a URL",
		script:  "#!ipxe\nkernel\nboot\n",
		wantErr: "the iPXE script loads no kernel",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseIPXEScript(tt.script)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestBootConfigFromArgs(t *testing.T) {
	g := NewWithT(t)
	all := map[string]string{ArgEngine: "https://e:6385", ArgHost: "ns~h~abc", ArgToken: "1.sig", "console": "ttyS0"}
	got, err := BootConfigFromArgs(all)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(deployapi.BootConfig{EngineURL: "https://e:6385", HostID: "ns~h~abc", Token: "1.sig"}))
	for _, missing := range []string{ArgEngine, ArgHost, ArgToken} {
		args := map[string]string{}
		for k, v := range all {
			if k != missing {
				args[k] = v
			}
		}
		_, err := BootConfigFromArgs(args)
		g.Expect(err).To(MatchError("kernel arguments metalshift.engine, metalshift.host and metalshift.token are required"), "without %s", missing)
	}
}
