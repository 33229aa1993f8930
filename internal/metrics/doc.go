// Package metrics is how metalshift's reconcilers report on the hub's
// metrics endpoint (controller-runtime's registry, served at the manager's
// --metrics-bind-address): gauges of objects by state, counted at scrape
// time from the manager's informer cache (StateCollector, registered with
// Add), and install duration histograms (InstallBuckets, ObserveDuration)
// observed from timestamps stored in the objects.
//
// It keeps no state of its own: a gauge is a count of what the API holds,
// so every replica, leader or not, reports the same values and a restarted
// manager loses nothing; a duration is measured between two times written
// in the API, so a leader that took over mid-install measures it right. It
// must not count in memory what the API can tell.
package metrics
