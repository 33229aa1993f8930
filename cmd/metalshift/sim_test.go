package main

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/cluster"
)

func TestParseAPIServer(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    cluster.APIServer
		wantErr string
	}{
		{name: "the default is a real kube-apiserver", value: "kube-apiserver", want: cluster.KubeAPIServer},
		{name: "in-memory is the fleet twin", value: "in-memory", want: cluster.InMemoryAPIServer},
		{name: "anything else names both choices", value: "inmemory", wantErr: `--api-server "inmemory": kube-apiserver or in-memory`},
		{name: "empty is refused too", value: "", wantErr: "kube-apiserver or in-memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parseAPIServer(tt.value)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestSimBMCDefaultsToKubeAPIServer(t *testing.T) {
	g := NewWithT(t)
	bmc, _, err := newSimCommand().Find([]string{"bmc"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bmc.Flags().Lookup("api-server").DefValue).To(Equal("kube-apiserver"))
}
