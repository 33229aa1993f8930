package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
)

// Call sends one request to a server machines reach, with bearer (when
// set) as its credential, and returns the status code and body: what an
// attacker's test sends and reads.
func Call(t testing.TB, method, url, bearer string, body []byte) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
