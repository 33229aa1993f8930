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
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/diskfs/go-diskfs/partition/gpt"
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
		Long: `Generate a raw whole-disk image of --size and serve it at http://<listen>/os.raw until Ctrl-C:
a GPT with one Linux filesystem partition of random data, as OS images are partitioned, so that
the deploy agent adds the config drive partition after it as it would on real hardware.
Prints (and writes to --env) IMAGE_URL and IMAGE_SHA256, for spec.image of a BareMetalHost.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := resource.ParseQuantity(strings.TrimSuffix(size, "B"))
			if err != nil || q.Value() < minImageSize {
				return fmt.Errorf("--size %q: want a size of at least 2Mi such as 64Mi or 64MiB", size)
			}
			return serveImage(cmd.Context(), cmd.OutOrStdout(), q.Value(), listen, env)
		},
	}
	cmd.Flags().StringVar(&size, "size", "64Mi", "Image size (e.g. 8MiB, 64Mi)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "Address to serve on")
	cmd.Flags().StringVar(&env, "env", "", "Also write IMAGE_URL and IMAGE_SHA256 to this file")
	return cmd
}

// minImageSize holds the partition table and a partition from 1 MiB on.
const minImageSize = 2 << 20

// osImage returns a raw whole-disk image of size bytes: a GPT (protective
// MBR, primary table, backup table in the image's last sectors) with one
// Linux filesystem partition from 1 MiB to the end, holding random data.
func osImage(size int64) ([]byte, error) {
	const sector = 512
	if size < minImageSize {
		return nil, fmt.Errorf("an image of %d bytes is smaller than %d", size, minImageSize)
	}
	data := make([]byte, size)
	first, last := uint64(1<<20/sector), uint64(size)/sector-34
	if _, err := rand.Read(data[first*sector : (last+1)*sector]); err != nil {
		return nil, err
	}
	table := &gpt.Table{LogicalSectorSize: sector, PhysicalSectorSize: sector, ProtectiveMBR: true,
		Partitions: []*gpt.Partition{{Index: 1, Start: first, End: last, Type: gpt.LinuxFilesystem, Name: "root"}}}
	if err := table.Write(memImage{data}, size); err != nil {
		return nil, fmt.Errorf("writing the image's partition table: %w", err)
	}
	return data, nil
}

// memImage is an image in memory, for go-diskfs to write to.
type memImage struct{ b []byte }

func (m memImage) Stat() (fs.FileInfo, error)     { return nil, errors.New("an image in memory") }
func (m memImage) Read([]byte) (int, error)       { return 0, errors.New("an image in memory") }
func (m memImage) Seek(int64, int) (int64, error) { return 0, errors.New("an image in memory") }
func (m memImage) Close() error                   { return nil }
func (m memImage) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m.b).ReadAt(p, off)
}

func (m memImage) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, fmt.Errorf("writing %d bytes at offset %d of an image of %d", len(p), off, len(m.b))
	}
	return copy(m.b[off:], p), nil
}

func serveImage(ctx context.Context, out io.Writer, size int64, listen, envFile string) error {
	data, err := osImage(size)
	if err != nil {
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
		if err := writeWhole(envFile, []byte(vars)); err != nil {
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
