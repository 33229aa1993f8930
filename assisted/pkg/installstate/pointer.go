package installstate

import (
	"fmt"

	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	"github.com/metalshift/metalshift/internal/ignition"
)

// PointerIgnition is the Ignition of a host joining an installed cluster
// the service knows no install state of (an imported one): a pointer to
// the cluster's machine-config-server for role at
// https://api-int.<clusterDomain>:22623/config/<role>, trusted with rootCA,
// with the host's override merged.
func PointerIgnition(clusterDomain, role string, rootCA, override []byte) ([]byte, error) {
	mcs := fmt.Sprintf("https://api-int.%s:%d", clusterDomain, bootstrapnode.MachineConfigServerPort)
	return ignition.Pointer(ignition.PointerOptions{MachineConfigServer: mcs, Role: role, RootCA: rootCA, Override: override})
}
