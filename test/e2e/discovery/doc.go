// Package discovery proves that an InfraEnv's discovery image boots a real
// machine: a QEMU VM boots the ISO the agent service serves (the live
// image of `make images` with the InfraEnv's configuration in its host
// region), and the discovery agent in it registers and reports the VM's
// hardware. It holds only that test, which needs QEMU, OVMF and the live
// images and takes a core for minutes: `make test` runs it on its own,
// after the other tests. It installs nothing (a TCG VM is far below a
// node's minimums) and must not grow into an install test: those run on
// the light simulator (test/e2e/agentinstall).
package discovery
