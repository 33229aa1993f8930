// Package shard splits a fleet between hub managers by Cluster API's
// watch-filter label, cluster.x-k8s.io/watch-filter: a manager started
// with a value (component.Hub.WatchFilterValue) owns the objects labelled
// with that value and nothing else; a manager without one owns every
// object. An object without the label belongs to no sharded manager.
//
// Controllers filter the events of the object they reconcile with Cluster
// API's predicates.ResourceHasFilterLabel and check Owns again once they
// have read it (a request mapped from another object's event carries no
// label); servers answer for an object only when their manager Owns it;
// what a controller or server creates on behalf of an object carries that
// object's label (Propagate). The package reads and writes no API.
package shard
