// Package deploy runs the host engine's deploy agent: it polls the engine
// for instructions (deployapi), writes images to the disk chosen by root
// device hints while verifying their checksum, writes the config drive,
// cleans disk metadata, and reports the outcome until the host is powered
// off. Block devices are an interface so that the simulator runs this same
// code against its synthetic disks.
package deploy
