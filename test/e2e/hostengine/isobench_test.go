package hostengine

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/deployserver"
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
	ctx := context.Background()
	ns := env.Namespace(b)
	var urls []string
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	srv := httptest.NewUnstartedServer(nil)
	s, err := deployserver.New(deployserver.Options{Client: env.Client, Key: key, BaseURL: "http://" + srv.Listener.Addr().String(), Images: images})
	if err != nil {
		b.Fatal(err)
	}
	srv.Config.Handler = s.Handler()
	srv.Start()
	defer srv.Close()
	for i := range hosts {
		h := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("iso-%d", i), Namespace: ns},
			Spec: metal3v1.BareMetalHostSpec{BMC: metal3v1.BMCDetails{Address: "redfish-virtualmedia://192.0.2.1/redfish/v1/Systems/1", CredentialsName: "none"}}}
		if err := env.Client.Create(ctx, h); err != nil {
			b.Fatal(err)
		}
		urls = append(urls, s.DeployImage(h).ISOURL)
	}
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
				t0 := time.Now()
				resp, err := client.Get(urls[i])
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
