package equinix

import "github.com/metalshift/metalshift/sim/fault"

func mustPlan(s string) *fault.Plan { return fault.MustParse(s) }
