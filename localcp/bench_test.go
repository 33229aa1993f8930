package localcp

import (
	"context"
	"testing"
	"time"
)

// BenchmarkHubStart measures how long a hub takes from Start to serving
// with every CRD of config established: on a new directory (certificates, etcd
// bootstrap, CRD creation) and resuming an existing one.
func BenchmarkHubStart(b *testing.B) {
	for _, resume := range []bool{false, true} {
		name := "new-dir"
		if resume {
			name = "resume"
		}
		b.Run(name, func(b *testing.B) {
			bin, crds := binDir(b), everyCRD(b)
			dir := ""
			if resume {
				dir = b.TempDir()
				h, err := Start(context.Background(), Options{Dir: dir, BinDir: bin, CRDs: crds})
				if err != nil {
					b.Fatal(err)
				}
				h.Stop()
			}
			var total time.Duration
			for b.Loop() {
				d := dir
				if !resume {
					d = b.TempDir()
				}
				start := time.Now()
				h, err := Start(context.Background(), Options{Dir: d, BinDir: bin, CRDs: crds})
				if err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				b.StopTimer()
				h.Stop()
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/start")
		})
	}
}
