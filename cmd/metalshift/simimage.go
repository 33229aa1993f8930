package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
)

func newSimImageCommand() *cobra.Command {
	var (
		size   string
		listen string
		env    string
	)
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Serve a generated raw OS image over HTTP, for provisioning simulated hosts",
		Long: `Generate a random raw image of --size and serve it at http://<listen>/os.raw until Ctrl-C.
Prints (and writes to --env) IMAGE_URL and IMAGE_SHA256, for spec.image of a BareMetalHost.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := resource.ParseQuantity(strings.TrimSuffix(size, "B"))
			if err != nil || q.Value() <= 0 {
				return fmt.Errorf("--size %q: want a positive size such as 64Mi or 64MiB", size)
			}
			return serveImage(cmd.Context(), cmd.OutOrStdout(), q.Value(), listen, env)
		},
	}
	cmd.Flags().StringVar(&size, "size", "64Mi", "Image size (e.g. 8MiB, 64Mi)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "Address to serve on")
	cmd.Flags().StringVar(&env, "env", "", "Also write IMAGE_URL and IMAGE_SHA256 to this file")
	return cmd
}

func serveImage(ctx context.Context, out io.Writer, size int64, listen, envFile string) error {
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	url := "http://" + l.Addr().String() + "/os.raw"
	vars := fmt.Sprintf("IMAGE_URL=%s\nIMAGE_SHA256=%s\n", url, hex.EncodeToString(sum[:]))
	if envFile != "" {
		if err := os.WriteFile(envFile, []byte(vars), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprint(out, vars)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/os.raw" {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "os.raw", time.Time{}, bytes.NewReader(data))
	})}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
