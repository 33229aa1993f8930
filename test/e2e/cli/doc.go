// Package cli drives the metalshift binary the way a user does, with the
// real kubectl: the embedded hub's every start and stop path, the
// simulator's BMCs and boot ISOs, and a Machine or a BareMetalHost
// provisioned on simulated hardware.
package cli
