// Package hostengine runs the host engine end to end on an envtest hub
// with hostenginetest: real BMC tools (OpenIPMI's ipmi_sim), QEMU virtual
// machines booting the live image (TestQEMUMachines, which `make test`
// runs alone in its QEMU suite), provisioning under the simulator's fault
// plans (sim/fault) and the engine's benchmarks.
package hostengine
