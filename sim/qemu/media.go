package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// media is what the BMC holds in a machine's virtual CD drive.
type media struct {
	gen    int    // counts changes; names the downloaded file
	url    string // as inserted; "" when empty
	file   string // the downloaded image, "" until it is there
	err    error  // why the download failed
	ready  chan struct{}
	cancel context.CancelFunc // of the download
}

// syncMedia makes the BMC hold what the machine's virtual CD drive holds:
// a new image is downloaded (then attached if the VM runs), an ejected one
// detached.
func (v *vm) syncMedia() {
	url := v.m.Media()
	v.mu.Lock()
	if v.media.ready != nil && v.media.url == url {
		v.mu.Unlock()
		return
	}
	if v.media.cancel != nil {
		v.media.cancel()
	}
	v.media = media{gen: v.media.gen + 1, url: url, ready: make(chan struct{})}
	gen := v.media.gen
	if url == "" {
		close(v.media.ready)
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		v.media.cancel = cancel
		go v.download(ctx, gen, url)
	}
	v.mu.Unlock()
	v.removeMediaFiles(gen)
	v.applyMedia()
}

// download fetches the image of generation gen, trying again a second
// apart on failure as a BMC reconnects, and attaches it.
func (v *vm) download(ctx context.Context, gen int, url string) {
	dst := filepath.Join(v.dir, fmt.Sprintf("cd-%d.iso", gen))
	from := hostURL(url, v.f.opts.GuestHostAlias)
	n, err := v.fetch(ctx, from, dst)
	for attempt := 1; err != nil && ctx.Err() == nil && attempt <= v.f.opts.MediaRetries; attempt++ {
		v.logf("Virtual media: %v; reading it again", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			n, err = v.fetch(ctx, from, dst)
		}
	}
	v.mu.Lock()
	current := v.media.gen == gen
	if current {
		v.media.err = err
		if err == nil {
			v.media.file = dst
		}
		close(v.media.ready)
	}
	v.mu.Unlock()
	switch {
	case !current:
		_ = os.Remove(dst)
		return
	case err != nil:
		v.logf("Virtual media: %v", err)
		return
	}
	v.logf("Virtual media: %s is in the CD drive (%d bytes from %s)", dst, n, redact(from))
	v.applyMedia()
}

func (v *vm) fetch(ctx context.Context, url, dst string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := v.f.opts.HTTP.Do(req)
	if err != nil {
		return 0, unwrapURL(err) // the URL's query is a signature: never log it
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", redact(url), resp.Status)
	}
	if err := os.MkdirAll(v.dir, 0o700); err != nil {
		return 0, err
	}
	tmp := dst + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return n, fmt.Errorf("GET %s: %w", redact(url), err)
	}
	return n, os.Rename(tmp, dst)
}

// removeMediaFiles removes the images of generations other than gen; a
// VM that has one attached keeps reading it (Linux keeps an open file).
func (v *vm) removeMediaFiles(gen int) {
	keep := fmt.Sprintf("cd-%d.iso", gen)
	files, _ := filepath.Glob(filepath.Join(v.dir, "cd-*.iso*"))
	for _, f := range files {
		if base := filepath.Base(f); base != keep && base != keep+".part" {
			_ = os.Remove(f)
		}
	}
}

// waitMedia waits for an inserted image's download before a CD boot.
func (v *vm) waitMedia(ctx context.Context) {
	v.mu.Lock()
	ready, url := v.media.ready, v.media.url
	v.mu.Unlock()
	if ready == nil || url == "" {
		return
	}
	select {
	case <-ready:
	default:
		v.logf("Virtual media: waiting for %s", redact(url))
		select {
		case <-ready:
		case <-ctx.Done():
		}
	}
}

// applyMedia puts the downloaded image (or none) in the running VM's CD
// drive through QMP. Callers change v.media first; whoever applies last
// applies the latest state.
func (v *vm) applyMedia() {
	v.applyMu.Lock()
	defer v.applyMu.Unlock()
	v.mu.Lock()
	p, want := v.proc, v.media.file
	v.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	have := p.attached
	p.mu.Unlock()
	if have == want {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), quitTimeout)
	defer cancel()
	var err error
	if want == "" {
		err = p.qmp.execute(ctx, "eject", map[string]any{"id": cdDevice, "force": true}, nil)
	} else {
		err = p.qmp.execute(ctx, "blockdev-change-medium", map[string]any{
			"id": cdDevice, "filename": want, "format": "raw", "read-only-mode": "read-only"}, nil)
	}
	if err != nil {
		v.logf("Virtual media: %v", err)
		return
	}
	p.mu.Lock()
	p.attached = want
	p.mu.Unlock()
}

// redact drops the query (signatures) from a URL for logs.
// unwrapURL drops the URL (and its signed query) from an HTTP client error.
func unwrapURL(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, redact(ue.URL), ue.Err)
	}
	return err
}

func redact(url string) string {
	u, _, _ := strings.Cut(url, "?")
	return u
}

// escapes are terminal control sequences firmware prints (colours, cursor
// moves, screen clears).
var escapes = regexp.MustCompile(`\x1b(\[[0-9;?=]*[ -/]*[@-~]|[()][0-9A-Za-z]|[@-~])`)

// cleanConsoleLine is a serial console line without control sequences,
// carriage returns and trailing blanks.
func cleanConsoleLine(s string) string {
	s = escapes.ReplaceAllString(s, "")
	if i := strings.LastIndexByte(strings.TrimRight(s, "\r"), '\r'); i >= 0 {
		s = s[i+1:] // a line redrawn in place shows what was drawn last
	}
	s = strings.Map(func(r rune) rune {
		if r < ' ' && r != '\t' || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return strings.TrimRight(s, " \t")
}
