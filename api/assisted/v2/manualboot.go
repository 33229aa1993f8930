package assistedapi

// ManualBootPath is metalshift's own addition to the agent REST API (not
// upstream's): the agent of a converged-flow discovery image (one the host
// engine boots for BareMetalHosts, see deploy/v1 Lookup) that finds no
// host for its machine says so here, with the InfraEnv's X-Secret-Key, so
// that the hub can tell the person who booted it by hand.
const ManualBootPath = "/metalshift/v1/infra-envs/%s/manual-boots"

// ManualBoot is the body of a ManualBootPath POST.
type ManualBoot struct {
	// MACAddresses are the machine's MAC addresses.
	MACAddresses []string `json:"mac_addresses"`
	// Reason is what the host engine's deploy server answered.
	Reason string `json:"reason,omitempty"`
}
