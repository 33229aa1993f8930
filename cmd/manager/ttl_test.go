package main

import (
	"os/exec"
	"testing"

	. "github.com/onsi/gomega"
)

// TestIgnitionTokenTTLMustBePositive: a token lifetime of zero or less is
// a usage error, said before anything starts.
func TestIgnitionTokenTTLMustBePositive(t *testing.T) {
	g := NewWithT(t)
	for _, ttl := range []string{"0s", "-1h"} {
		out, err := exec.Command(managerBin, "--ignition-token-ttl="+ttl).CombinedOutput()
		g.Expect(err).To(HaveOccurred(), ttl)
		g.Expect(err.(*exec.ExitError).ExitCode()).To(Equal(2))
		g.Expect(string(out)).To(ContainSubstring("--ignition-token-ttl must be positive"))
	}
}
