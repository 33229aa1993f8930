package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// httpMedia reads a remote image with HTTP range requests, as BMCs read
// virtual media, in blocks it keeps.
type httpMedia struct {
	ctx    context.Context
	client *http.Client
	url    string
	size   int64
	// retries is how many more times a request that failed (the size
	// probe, or a block's read) is made again, a second apart, as a BMC
	// reconnects to the image's server (which may have been restarted, or
	// replaced by another replica); onRetry, when set, is told each failure
	// retried.
	retries int
	onRetry func(error)

	mu     sync.Mutex
	blocks map[int64][]byte
}

const mediaBlock = 64 << 10

// openHTTPMedia checks that url serves ranges and learns its size.
func openHTTPMedia(ctx context.Context, client *http.Client, url string, retries int, onRetry func(error)) (*httpMedia, error) {
	m := &httpMedia{ctx: ctx, client: client, url: url, retries: retries, onRetry: onRetry, blocks: map[int64][]byte{}}
	if err := m.again(m.probeSize); err != nil {
		return nil, err
	}
	return m, nil
}

// probeSize learns the image's size from a one-byte range.
func (m *httpMedia) probeSize() error {
	resp, err := m.get(0, 0)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, total, ok := strings.Cut(resp.Header.Get("Content-Range"), "/")
	if m.size, err = strconv.ParseInt(total, 10, 64); !ok || err != nil {
		return fmt.Errorf("GET %s: the server does not say the image's size (Content-Range %q)", redact(m.url), resp.Header.Get("Content-Range"))
	}
	return nil
}

// again runs try, and up to m.retries more times a second apart while it
// fails.
func (m *httpMedia) again(try func() error) error {
	err := try()
	for attempt := 1; err != nil && attempt <= m.retries; attempt++ {
		if m.onRetry != nil {
			m.onRetry(err)
		}
		select {
		case <-m.ctx.Done():
			return m.ctx.Err()
		case <-time.After(time.Second):
		}
		err = try()
	}
	return err
}

func (m *httpMedia) get(from, to int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(m.ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", from, to))
	resp, err := m.client.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) { // the URL's query is a signature: never log it
			return nil, fmt.Errorf("%s %s: %w", ue.Op, redact(ue.URL), ue.Err)
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusPartialContent {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s with a range: %s, want 206 Partial Content", redact(m.url), resp.Status)
	}
	return resp, nil
}

// ReadAt implements io.ReaderAt.
func (m *httpMedia) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= m.size {
			return n, io.EOF
		}
		b, err := m.block(pos / mediaBlock)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], b[pos%mediaBlock:])
	}
	return n, nil
}

func (m *httpMedia) block(i int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.blocks[i]; ok {
		return b, nil
	}
	from := i * mediaBlock
	to := min(from+mediaBlock, m.size) - 1
	var b []byte
	err := m.again(func() (err error) {
		b, err = m.read(from, to)
		return err
	})
	if err != nil {
		return nil, err
	}
	m.blocks[i] = b
	return b, nil
}

// read reads the bytes from to to (inclusive) with one range request.
func (m *httpMedia) read(from, to int64) ([]byte, error) {
	resp, err := m.get(from, to)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b := make([]byte, to-from+1)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, fmt.Errorf("reading %s: %w", redact(m.url), err)
	}
	return b, nil
}
