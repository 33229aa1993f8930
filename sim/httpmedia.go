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
)

// httpMedia reads a remote image with HTTP range requests, as BMCs read
// virtual media, in blocks it keeps.
type httpMedia struct {
	ctx    context.Context
	client *http.Client
	url    string
	size   int64

	mu     sync.Mutex
	blocks map[int64][]byte
}

const mediaBlock = 64 << 10

// openHTTPMedia checks that url serves ranges and learns its size.
func openHTTPMedia(ctx context.Context, client *http.Client, url string) (*httpMedia, error) {
	m := &httpMedia{ctx: ctx, client: client, url: url, blocks: map[int64][]byte{}}
	resp, err := m.get(0, 0)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, total, ok := strings.Cut(resp.Header.Get("Content-Range"), "/")
	if m.size, err = strconv.ParseInt(total, 10, 64); !ok || err != nil {
		return nil, fmt.Errorf("GET %s: the server does not say the image's size (Content-Range %q)", redact(url), resp.Header.Get("Content-Range"))
	}
	return m, nil
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
	resp, err := m.get(from, to)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b := make([]byte, to-from+1)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, fmt.Errorf("reading %s: %w", redact(m.url), err)
	}
	m.blocks[i] = b
	return b, nil
}
