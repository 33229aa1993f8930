// Package rfc2136 writes a cluster's DNS records to a DNS server the user
// names, by dynamic update (RFC 2136) signed with a TSIG key (RFC 8945).
// Equinix Metal has no managed DNS, so this is how the Equinix Metal
// provider publishes api, api-int and *.apps of a cluster.
//
// Server.Ensure makes the A and AAAA records of each name exactly the
// addresses given: one update message deletes the name's A and AAAA RRsets
// and adds the new records, which the server applies at once or not at all,
// so that a repeated Ensure changes nothing and a name is never seen half
// written. Server.Remove deletes them; names that have none are fine.
// ClusterRecords gives the records of a cluster.
//
// Updates go over TCP, whose answers are never truncated. An answer other
// than success is an *Error naming the server, the zone and the rcode (and
// the TSIG error when the server rejected the key); so is an update the
// server did not answer in time. A signed update's success counts only when
// the answer carries a TSIG that verifies with the key. The key's secret is
// never in an error.
package rfc2136
