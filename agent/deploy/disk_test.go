package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// flakyImage serves a random image of 3 MiB; the answers in cut break
// off after that many bytes of their body (the connection is dropped), and
// ranges are honoured unless noRanges.
type flakyImage struct {
	data     []byte
	sum      string
	noRanges bool
	status   int // every answer, when set

	mu     sync.Mutex
	cut    []int
	ranges []string // the Range header of every request
	ifs    []string // the If-Range header of every request
}

func newFlakyImage(cut ...int) *flakyImage {
	f := &flakyImage{data: make([]byte, 3<<20), cut: cut}
	_, _ = rand.Read(f.data)
	s := sha256.Sum256(f.data)
	f.sum = hex.EncodeToString(s[:])
	return f
}

func (f *flakyImage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.ranges = append(f.ranges, r.Header.Get("Range"))
	f.ifs = append(f.ifs, r.Header.Get("If-Range"))
	cut := -1
	if len(f.cut) > 0 {
		cut, f.cut = f.cut[0], f.cut[1:]
	}
	f.mu.Unlock()
	if f.status != 0 {
		http.Error(w, "no", f.status)
		return
	}
	if f.noRanges {
		r.Header.Del("Range")
	}
	w.Header().Set("ETag", `"img-1"`)
	if cut < 0 {
		http.ServeContent(w, r, "os.raw", time.Time{}, bytes.NewReader(f.data))
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data[:cut])
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler) // the connection drops mid-body
}

func (f *flakyImage) image(url string) deployapi.Image {
	return deployapi.Image{URL: url + "/os.raw", Checksum: f.sum, ChecksumType: "sha256"}
}

// TestWriteImageResumesABrokenDownload: a download that breaks off is
// resumed with a Range request (If-Range the first answer's ETag) from
// where it stopped; the disk holds the image and its checksum is checked.
func TestWriteImageResumesABrokenDownload(t *testing.T) {
	g := NewWithT(t)
	img := newFlakyImage(3<<19, 1<<19)
	srv := httptest.NewServer(img)
	defer srv.Close()
	disk := &memDisk{b: make([]byte, diskSize)}
	var progress atomic.Int64
	var logs []string
	n, err := writeImage(context.Background(), srv.Client(), disk, img.image(srv.URL), imageWrite{retryPause: time.Millisecond, progress: &progress,
		logf: func(format string, args ...any) { logs = append(logs, format) }})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(int64(len(img.data))))
	g.Expect(progress.Load()).To(Equal(n))
	g.Expect(disk.b[:len(img.data)]).To(Equal(img.data))
	g.Expect(img.ranges).To(HaveLen(3))
	g.Expect(img.ranges[0]).To(BeEmpty())
	g.Expect(img.ranges[1]).To(MatchRegexp(`^bytes=[1-9][0-9]*-$`), "resumed, not started over")
	g.Expect(img.ranges[2]).To(MatchRegexp(`^bytes=[1-9][0-9]*-$`))
	g.Expect(img.ifs[1:]).To(HaveEach(`"img-1"`))
	g.Expect(logs).To(HaveLen(2))
}

// TestWriteImageStartsOverWithoutRanges: a server that answers a range
// with the whole image makes the write start over from the first byte.
func TestWriteImageStartsOverWithoutRanges(t *testing.T) {
	g := NewWithT(t)
	img := newFlakyImage(1 << 20)
	img.noRanges = true
	srv := httptest.NewServer(img)
	defer srv.Close()
	disk := &memDisk{b: make([]byte, diskSize)}
	n, err := writeImage(context.Background(), srv.Client(), disk, img.image(srv.URL), imageWrite{retryPause: time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(int64(len(img.data))))
	g.Expect(disk.b[:len(img.data)]).To(Equal(img.data))
	g.Expect(img.ranges).To(HaveLen(2))
}

// TestWriteImageGivesUp: a server that keeps failing is asked
// ImageRetries+1 times, then the deploy fails; a 404 is not asked again;
// a resumed download of another image fails the checksum.
func TestWriteImageGivesUp(t *testing.T) {
	g := NewWithT(t)
	img := newFlakyImage()
	img.status = http.StatusServiceUnavailable
	srv := httptest.NewServer(img)
	defer srv.Close()
	disk := &memDisk{b: make([]byte, diskSize)}
	_, err := writeImage(context.Background(), srv.Client(), disk, img.image(srv.URL), imageWrite{retryPause: time.Millisecond})
	g.Expect(err).To(MatchError(ContainSubstring("gave up after 9 attempts")))
	g.Expect(img.ranges).To(HaveLen(ImageRetries + 1))

	img = newFlakyImage()
	img.status = http.StatusNotFound
	srv2 := httptest.NewServer(img)
	defer srv2.Close()
	_, err = writeImage(context.Background(), srv2.Client(), disk, img.image(srv2.URL), imageWrite{retryPause: time.Millisecond})
	g.Expect(err).To(MatchError(ContainSubstring("404")))
	g.Expect(img.ranges).To(HaveLen(1))

	img = newFlakyImage(1 << 20)
	srv3 := httptest.NewServer(img)
	defer srv3.Close()
	want := img.image(srv3.URL)
	want.Checksum = sha256Hex([]byte("another image"))
	_, err = writeImage(context.Background(), srv3.Client(), disk, want, imageWrite{retryPause: time.Millisecond})
	g.Expect(err).To(MatchError(ContainSubstring("checksum mismatch")))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
