package discovery_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/deploy"
	"github.com/metalshift/metalshift/agent/discovery"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// TestCustomDeploy: a converged-flow image provides start_assisted_install
// only; the discovery agent it starts registers with the host's proof the
// instructions carry, and ends the custom deploy with its error when the
// service refuses it.
func TestCustomDeploy(t *testing.T) {
	g := NewWithT(t)
	run := discovery.CustomDeploy(discovery.Options{})
	err := run(context.Background(), deployapi.Instructions{Action: deployapi.ActionCustomDeploy, CustomDeploy: "install_coreos"})
	g.Expect(err).To(MatchError(deploy.ErrUnknownMethod))
	g.Expect(err).To(MatchError(`unknown custom deploy method "install_coreos": this image provides start_assisted_install`))

	s := newService(t)
	s.registerStatus = http.StatusForbidden
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = discovery.CustomDeploy(discovery.Options{Config: deployapi.Discovery{ServiceURL: s.server.URL, InfraEnvID: infraEnvID, Token: token}, HostID: hostID})(ctx,
		deployapi.Instructions{Action: deployapi.ActionCustomDeploy, CustomDeploy: deployapi.MethodStartAssistedInstall, RegistrationProof: "the-host-proof"})
	g.Expect(err).To(MatchError(ContainSubstring("403")))
	g.Expect(s.proofs).To(Equal([]string{"the-host-proof"}))
}
