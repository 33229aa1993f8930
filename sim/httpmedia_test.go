package sim

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestHTTPMediaReadAgain: a block whose read breaks off (the image's
// server went away mid-answer: a replica killed) is read again, as a BMC
// reconnects to the server of its virtual media; with no retries the read
// fails.
func TestHTTPMediaReadAgain(t *testing.T) {
	g := NewWithT(t)
	image := bytes.Repeat([]byte("0123456789abcdef"), 3*mediaBlock/16)
	var cut atomic.Int32 // the reads of the second block still to cut off
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Range"), "bytes=65536-") && cut.Add(-1) >= 0 {
			// Half the answer, then the connection is gone.
			w.Header().Set("Content-Range", "bytes 65536-131071/196608")
			w.Header().Set("Content-Length", "65536")
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(image[mediaBlock : mediaBlock+100])
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		http.ServeContent(w, r, "deploy.iso", time.Time{}, bytes.NewReader(image))
	}))
	t.Cleanup(hs.Close)
	ctx := context.Background()

	cut.Store(1)
	m, err := openHTTPMedia(ctx, hs.Client(), hs.URL, 2, nil)
	g.Expect(err).NotTo(HaveOccurred())
	got := make([]byte, len(image))
	n, err := m.ReadAt(got, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(len(image)))
	g.Expect(got).To(Equal(image), "the block cut off was read again, whole")
	g.Expect(cut.Load()).To(BeNumerically("<", 0), "the cut happened")

	cut.Store(1)
	m, err = openHTTPMedia(ctx, hs.Client(), hs.URL, 0, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = m.ReadAt(got, 0)
	g.Expect(err).To(HaveOccurred(), "with no retries the cut read fails")
}
