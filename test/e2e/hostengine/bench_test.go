package hostengine

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
)

// writeCounter counts the API writes of the engine.
type writeCounter struct {
	rt     http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.writes.Add(1)
	}
	return w.rt.RoundTrip(r)
}

// BenchmarkProvision500 takes BENCH_HOSTS (default 500) hosts from creation
// to provisioned against the Redfish emulator with no injected latency and
// reports the wall time, the engine's API writes per host and the peak RSS
// of the process (engine, simulator and every deploy agent together).
func BenchmarkProvision500(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("BENCH_HOSTS")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		b.StopTimer()
		ns := env.Namespace(b)
		counter := &writeCounter{}
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = 500, 1000
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter }
		scheme, _ := component.NewScheme(hostengine.Component())
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: "0"},
			Controller: ctrlConfigSkipNameValidation()})
		if err != nil {
			b.Fatal(err)
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		ln := testenv.Listen(b)
		addr := ln.Addr().String()
		ctx, cancel := context.WithCancel(context.Background())
		if err := hostengine.Setup(ctx, mgr, hostengine.Options{DeployListener: ln, SigningKey: key, Concurrency: 50,
			BMCEgress: egress.Policy{AllowLoopback: true}}); err != nil {
			b.Fatal(err)
		}
		go func() { _ = mgr.Start(ctx) }()
		lab := sim.NewLab(sim.LabOptions{Hosts: n, Password: canary, BootURL: "http://" + addr, AgentPollInterval: 500 * time.Millisecond, DiskSizeBytes: 64 << 30})
		if err := lab.Start("127.0.0.1:0"); err != nil {
			b.Fatal(err)
		}
		img := newImageServer(b, 256<<10, false)
		writer, _ := client.New(env.Config, client.Options{Scheme: scheme})
		start := time.Now()
		b.StartTimer()

		var eg errgroup.Group
		eg.SetLimit(20)
		for i := range n {
			eg.Go(func() error {
				host, secret := lab.Host(lab.Machines[i], ns, true)
				host.Spec.Image, host.Spec.Online = img.Image(), true
				host.Spec.UserData = &corev1.SecretReference{Name: "user-data"}
				if err := writer.Create(ctx, secret); err != nil {
					return err
				}
				return writer.Create(ctx, host)
			})
		}
		ud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-data", Namespace: ns}, StringData: map[string]string{"userData": "{}"}}
		if err := writer.Create(ctx, ud); err != nil {
			b.Fatal(err)
		}
		if err := eg.Wait(); err != nil {
			b.Fatal(err)
		}
		for {
			hosts := &metal3v1.BareMetalHostList{}
			if err := writer.List(ctx, hosts, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			done := 0
			for _, h := range hosts.Items {
				if h.Status.Provisioning.State == metal3v1.StateProvisioned {
					done++
				}
			}
			if done == n {
				break
			}
			if time.Since(start) > 20*time.Minute {
				b.Fatalf("only %d of %d hosts provisioned after 20 minutes", done, n)
			}
			time.Sleep(500 * time.Millisecond)
		}
		b.StopTimer()
		elapsed := time.Since(start)
		b.ReportMetric(elapsed.Seconds(), "s/all-hosts")
		b.ReportMetric(float64(counter.writes.Load())/float64(n), "api-writes/host")
		b.ReportMetric(peakRSSMiB(), "peak-rss-MiB")
		fmt.Fprintf(os.Stderr, "provisioned %d hosts in %s; %.1f API writes per host; peak RSS %.0f MiB\n",
			n, elapsed.Round(time.Second), float64(counter.writes.Load())/float64(n), peakRSSMiB())
		cancel()
		lab.Close()
		b.StartTimer()
	}
}
