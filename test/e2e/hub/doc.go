// Package hub runs end-to-end scenarios of a hub and the clusters it
// installs through the real binaries (metalshift, manager), the embedded
// hub and the simulator, as a user would from a terminal: create cluster,
// clusterctl init, leader election, a crash, a real node, the attacker.
package hub
