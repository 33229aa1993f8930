package deployserver

import (
	"bytes"
	"net/http"
	"time"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	"github.com/metalshift/metalshift/imageservice"
)

// A metal cloud's device (Equinix Metal's custom_ipxe) boots the script at
// deployapi.MetalCloudScriptPath, with the query its infrastructure
// provider signed: the live kernel and initramfs, and an initrd whose boot
// configuration runs the metal cloud installer (agent/metalcloud), which
// reads the cloud's metadata service and writes the image. Everything is
// in the signed query: nothing is read from the API, and a host engine
// without BareMetalHosts serves it too.

func (s *Server) addMetalCloud(mux *http.ServeMux) {
	mux.HandleFunc("GET "+deployapi.MetalCloudScriptPath, s.serveMetalCloudScript)
	mux.HandleFunc("GET "+deployapi.MetalCloudKernelPath, s.serveMetalCloudKernel)
	mux.HandleFunc("GET "+deployapi.MetalCloudInitrdPath, s.serveMetalCloudKernel)
	mux.HandleFunc("GET "+deployapi.MetalCloudHostPath, s.serveMetalCloudHost)
}

// metalCloudBoot verifies the request's signed query, answering it itself
// when it does not verify.
func (s *Server) metalCloudBoot(w http.ResponseWriter, r *http.Request) (deployapi.MetalCloudBoot, bool) {
	b, _, err := deployapi.VerifyMetalCloudQuery(s.key, r.URL.Query(), s.clock.Now())
	if err != nil {
		http.Error(w, "invalid or expired boot URL", http.StatusForbidden)
		return b, false
	}
	return b, true
}

func (s *Server) serveMetalCloudScript(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.metalCloudBoot(w, r); !ok {
		return
	}
	q := "?" + r.URL.RawQuery
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(imageservice.DeployIPXEScript(s.imageBase+deployapi.MetalCloudKernelPath+q,
		s.imageBase+deployapi.MetalCloudInitrdPath+q, s.imageBase+deployapi.MetalCloudHostPath+q)))
}

func (s *Server) serveMetalCloudKernel(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.metalCloudBoot(w, r); !ok {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if r.URL.Path == deployapi.MetalCloudInitrdPath {
		http.ServeContent(w, r, "initrd.img", s.images.ModTime, s.images.Initrd())
		return
	}
	http.ServeContent(w, r, "vmlinuz", s.images.ModTime, s.images.Kernel())
}

func (s *Server) serveMetalCloudHost(w http.ResponseWriter, r *http.Request) {
	b, ok := s.metalCloudBoot(w, r)
	if !ok {
		return
	}
	mc := b.MetalCloud
	data, err := imageservice.HostInitrd(deployapi.BootConfig{MetalCloud: &mc})
	if err != nil {
		http.Error(w, "building the machine's initrd failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "host.img", time.Time{}, bytes.NewReader(data))
}
