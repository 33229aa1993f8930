package deployserver

import (
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	"github.com/metalshift/metalshift/imageservice"
)

// BenchmarkISODownloads50: 50 hosts download their deploy ISO at once over
// loopback, each with its own configuration in the host region. Reports
// the aggregate throughput and the slowest download. Uses the live images
// when $METALSHIFT_IMAGES_DIR holds them (make bench builds them), else the
// light ones.
func BenchmarkISODownloads50(b *testing.B) {
	const hosts = 50
	images, err := imageservice.LightImages()
	if dir := os.Getenv("METALSHIFT_IMAGES_DIR"); dir != "" {
		if images, err = imageservice.LoadImages(dir); err == nil {
			defer images.Close()
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	srv := httptest.NewUnstartedServer(nil)
	s, err := New(Options{Key: key, BaseURL: "http://" + srv.Listener.Addr().String(), Images: images})
	if err != nil {
		b.Fatal(err)
	}
	srv.Config.Handler = s.Handler()
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: hosts}}
	var total int64
	var slowest time.Duration
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("bench~host-%d~0123456789ab", i)
				exp := time.Now().Add(time.Hour)
				url := s.baseURL + ISOPath + "?" + deployapi.SignURLQuery(key, ISOPath, id, exp)
				t0 := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Errorf("download %d: %v %s", i, err, resp.Status)
					return
				}
				mu.Lock()
				total += n
				slowest = max(slowest, time.Since(t0))
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(total)/(1<<20)/elapsed.Seconds(), "MiB/s")
	b.ReportMetric(slowest.Seconds(), "slowest-s")
	b.ReportMetric(float64(total)/float64(b.N*hosts)/(1<<20), "MiB/iso")
}
