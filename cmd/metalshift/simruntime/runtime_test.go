package simruntime

import "testing"

func TestRuns(t *testing.T) {
	for image, want := range map[string]bool{
		"metalshift/manager:latest":               true,
		"ghcr.io/metalshift/manager:v0.4.0":       true,
		"registry.local:5000/metalshift/manager":  true,
		"ghcr.io/metalshift/manager@sha256:abcd":  true,
		"quay.io/openshift/origin-baremetal:4.20": false,
		"ghcr.io/metalshift/manager-debug:v1":     false,
		"ghcr.io/notmetalshift/manager:v1":        false,
	} {
		if got := (Manager{}).Runs(image); got != want {
			t.Errorf("Runs(%s) = %v, want %v", image, got, want)
		}
	}
}
