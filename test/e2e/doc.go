// Package e2e runs end-to-end scenarios through the real metalshift binary,
// the embedded hub and the simulator, as a user would from a terminal.
package e2e
