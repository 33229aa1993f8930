package assisted

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
)

func TestServiceUnauthenticated(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{http.MethodGet, "/images/infra-envs/x/discovery.iso", true},
		{http.MethodPost, "/api/assisted-install/v2/infra-envs/x/hosts", true},
		{http.MethodPost, "/metalshift/v1/infra-envs/x/manual-boots", true},
		{http.MethodGet, "/api/assisted-install/v2/events", true},
		{http.MethodPost, "/api/assisted-install/v2/clusters/x/logs", true},
		{http.MethodGet, "/api/assisted-install/v2/infra-envs/x/hosts/y/instructions", false},
		{http.MethodPut, "/api/assisted-install/v2/infra-envs/x/hosts/y/progress", false},
		{http.MethodGet, "/api/assisted-install/v2/clusters/x/downloads/files", false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r, _ := http.NewRequestWithContext(context.Background(), tc.method, "http://hub"+tc.path, nil)
			NewWithT(t).Expect(serviceUnauthenticated(r)).To(Equal(tc.want))
		})
	}
}
