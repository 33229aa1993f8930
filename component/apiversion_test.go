package component

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestNewestContractVersion(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		want    string
		wantErr bool
	}{
		{name: "one version", labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha1"}, want: "v1alpha1"},
		{name: "newest of several", labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha1_v1beta1_v1alpha2"}, want: "v1beta1"},
		{name: "GA beats beta", labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta2_v1"}, want: "v1"},
		{name: "newer contract first", labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha2", "cluster.x-k8s.io/v1beta1": "v1alpha1"}, want: "v1alpha2"},
		{name: "older contract only", labels: map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha3"}, want: "v1alpha3"},
		{name: "no contract label", labels: map[string]string{"app": "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := newestContractVersion(tt.labels)
			if tt.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
