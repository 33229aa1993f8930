package shard_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalshift/metalshift/internal/shard"
)

func labelled(labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
}

func TestOwns(t *testing.T) {
	tests := []struct {
		name   string
		value  string
		labels map[string]string
		want   bool
	}{
		{name: "no filter owns an unlabelled object", labels: nil, want: true},
		{name: "no filter owns any shard's object", labels: map[string]string{shard.Label: "b"}, want: true},
		{name: "a filter owns its shard", value: "a", labels: map[string]string{shard.Label: "a"}, want: true},
		{name: "a filter does not own another shard", value: "a", labels: map[string]string{shard.Label: "b"}, want: false},
		{name: "a filter does not own an unlabelled object", value: "a", labels: map[string]string{"other": "a"}, want: false},
		{name: "a filter does not own an empty label", value: "a", labels: map[string]string{shard.Label: ""}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(shard.Owns(tt.value, labelled(tt.labels))).To(Equal(tt.want))
		})
	}
}

func TestPropagate(t *testing.T) {
	tests := []struct {
		name     string
		from, to map[string]string
		want     map[string]string
	}{
		{name: "labels an unlabelled object", from: map[string]string{shard.Label: "a"}, to: nil, want: map[string]string{shard.Label: "a"}},
		{name: "keeps the other labels", from: map[string]string{shard.Label: "a"}, to: map[string]string{"x": "y", shard.Label: "b"},
			want: map[string]string{"x": "y", shard.Label: "a"}},
		{name: "an unsharded owner unshards", from: map[string]string{"x": "y"}, to: map[string]string{"x": "z", shard.Label: "b"},
			want: map[string]string{"x": "z"}},
		{name: "an unsharded owner leaves nil labels", from: nil, to: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			to := labelled(tt.to)
			shard.Propagate(labelled(tt.from), to)
			NewWithT(t).Expect(to.Labels).To(Equal(tt.want))
		})
	}
}

func TestListOptions(t *testing.T) {
	g := NewWithT(t)
	g.Expect(shard.ListOptions("")).To(BeEmpty())
	g.Expect(shard.ListOptions("a")).To(HaveLen(1))
}
