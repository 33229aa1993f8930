// Package equinixmetalcluster reconciles EquinixMetalClusters: two elastic
// IPs reserved for the cluster and tagged with it, the API's and the
// ingress's; the API's is the control-plane endpoint, assigned to an active
// control-plane device and moved when that device goes, the ingress's to a
// worker (a control-plane device while there is none); both released, and
// their assignments dropped, when the cluster is deleted.
package equinixmetalcluster
