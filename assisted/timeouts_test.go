package assisted

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/metalshift/metalshift/component"
)

// TestHostTimeoutFlags: the manager's flags for the hosts' install
// timeouts take stage names and upstream's setting names, and refuse
// unknown stages and durations that are not positive.
func TestHostTimeoutFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: nil},
		{args: []string{"--agent-installation-timeout=5m", "--agent-host-stage-timeouts=Writing image to disk=45m,REBOOTING=1h"}},
		{args: []string{"--agent-host-stage-timeouts=Flying=1m"}, wantErr: `--agent-host-stage-timeouts: unknown host stage "Flying"`},
		{args: []string{"--agent-host-stage-timeouts=Rebooting=soon"}, wantErr: `--agent-host-stage-timeouts: timeout of host stage "Rebooting": "soon" is not a positive duration`},
		{args: []string{"--agent-installation-timeout=-1m"}, wantErr: "--agent-installation-timeout must not be negative"},
	} {
		g := NewWithT(t)
		c := Component()
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		c.Flags(fs)
		args := append([]string{"--agent-service-listen-address=127.0.0.1:0", "--agent-service-insecure-http"}, tc.args...)
		g.Expect(fs.Parse(args)).To(Succeed())
		err := c.Complete(&component.Options{SigningKey: []byte("timeouts-test-signing-key-32byte")})
		if tc.wantErr == "" {
			g.Expect(err).NotTo(HaveOccurred(), "%v", tc.args)
		} else {
			g.Expect(err).To(MatchError(tc.wantErr), "%v", tc.args)
		}
	}
}
