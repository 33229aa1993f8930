// Package agent is the code that runs on a host booted from a metalshift
// image. Subpackage deploy is the deploy agent of the host engine: it asks
// the engine what to do (deploy an image, clean disks), does it against a
// pluggable block-device backend (real disks on hardware, simulated disks in
// sim/), and reports back. It always initiates the connection.
package agent
