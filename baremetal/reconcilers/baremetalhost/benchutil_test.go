package baremetalhost_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
)

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func newImageServerB(b *testing.B, size int) *imageServer {
	s := &imageServer{data: make([]byte, size)}
	_, _ = rand.Read(s.data)
	sum := sha256.Sum256(s.data)
	s.sha256 = hex.EncodeToString(sum[:])
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.downloads.Add(1)
		_, _ = w.Write(s.data)
	}))
	b.Cleanup(s.Close)
	return s
}

// peakRSSMiB reads the peak resident set size of this process (VmHWM).
func peakRSSMiB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
