package shard

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Label is the label whose value names an object's shard.
const Label = clusterv1.WatchLabel

// Owns reports whether a manager with watch-filter value owns obj: every
// object when value is empty, else only those labelled Label=value.
func Owns(value string, obj metav1.Object) bool {
	return value == "" || obj.GetLabels()[Label] == value
}

// Propagate gives to the shard of from: to carries from's Label, or none
// when from has none. What a controller or server creates for an object
// (an InfraEnv's Agents, a host's PreprovisioningImage) is then reconciled
// and served by the same manager.
func Propagate(from, to metav1.Object) {
	v, ok := from.GetLabels()[Label]
	labels := to.GetLabels()
	if !ok {
		if _, had := labels[Label]; had {
			delete(labels, Label)
			to.SetLabels(labels)
		}
		return
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[Label] = v
	to.SetLabels(labels)
}

// ListOptions restrict a List to the objects a manager with watch-filter
// value owns: none when value is empty.
func ListOptions(value string) []client.ListOption {
	if value == "" {
		return nil
	}
	return []client.ListOption{client.MatchingLabels{Label: value}}
}
