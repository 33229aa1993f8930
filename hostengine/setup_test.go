package hostengine

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
)

func TestDeployUnauthenticated(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{http.MethodGet, "/images/deploy.iso", true},
		{http.MethodGet, "/images/deploy-kernel", true},
		{http.MethodGet, "/boot/by-mac/52:54:00:00:00:01", true},
		{http.MethodPost, "/deploy/v1/lookup", true},
		{http.MethodGet, "/deploy/v1/hosts/x/instructions", false},
		{http.MethodPost, "/deploy/v1/hosts/x/status", false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r, _ := http.NewRequestWithContext(context.Background(), tc.method, "http://hub"+tc.path, nil)
			NewWithT(t).Expect(deployUnauthenticated(r)).To(Equal(tc.want))
		})
	}
}
