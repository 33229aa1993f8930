package deployserver

import (
	"net/http"
	"strings"
)

// BootHandler serves, for firmware that cannot verify the server's
// certificate (iPXE, which cannot be given the hub's CA), what a network
// boot loads before the agent runs: the boot scripts by MAC address, and
// the files they load — the deploy kernel and initramfs, the same bytes
// for every host, and the host's initrd (its boot configuration, which
// points the agent at BaseURL over https with the CA to verify it), and
// what metal cloud devices boot (addMetalCloud). The scripts it serves
// load those files from bootURL. The agent API, the
// ISOs and the signed iPXE scripts are served by Handler only.
func (s *Server) BootHandler(bootURL string) http.Handler {
	b := *s
	b.imageBase = strings.TrimSuffix(bootURL, "/")
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PXEPath+"{mac}", b.serveByMAC)
	mux.HandleFunc("GET "+KernelPath, b.serveKernel)
	mux.HandleFunc("GET "+InitrdPath, b.serveKernel)
	mux.HandleFunc("GET "+HostInitrdPath, b.serveHostInitrd)
	b.addMetalCloud(mux)
	return mux
}
