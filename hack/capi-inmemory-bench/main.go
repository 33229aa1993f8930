package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	mode := flag.String("mode", "install", "install (Cluster API with the in-memory provider on envtest) or memory (API servers per cluster)")
	n := flag.Int("clusters", 2, "number of clusters")
	server := flag.String("server", "upstream", "memory mode: upstream (Cluster API's in-memory API server) or ours (sim/kubeapi)")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound of the run")
	flag.BoolVar(&withClusterVersion, "clusterversion", true, "memory mode: each cluster also holds the ClusterVersion and ClusterOperator CRDs and objects (where the server serves CRDs)")
	verbose := flag.Bool("v", false, "controller logs to stderr")
	flag.Parse()
	if *verbose {
		ctrl.SetLogger(zap.New())
	} else {
		ctrl.SetLogger(logr.Discard())
		log.SetOutput(io.Discard) // Cluster API's in-memory server's HTTP library complains through it
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, *mode, *server, *n); err != nil {
		fmt.Fprintln(os.Stderr, "capi-inmemory-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, mode, server string, n int) error {
	switch mode {
	case "install":
		d, err := runInstall(ctx, n, os.Getenv("KUBEBUILDER_ASSETS"))
		if err != nil {
			return err
		}
		fmt.Printf("RESULT install clusters=%d seconds=%.3f cluster-api=v1.14.2\n", n, d.Seconds())
		return nil
	case "memory":
		return runMemory(ctx, server, n)
	}
	return fmt.Errorf("unknown -mode %q", mode)
}
