package qemu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestQMPConversations plays the conversations in testdata/qmp: lines
// "< json" QEMU sends ("< EOF" closes), "> json" the client must send;
// "call <command> [arguments]" the client runs, "returns json" or
// "error <text>" is what the call gives, "event <name> <data>" the events
// the client saw in order, "dial-error <text>" a refused greeting.
func TestQMPConversations(t *testing.T) {
	files, err := filepath.Glob("testdata/qmp/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no conversations in testdata/qmp: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			playQMP(t, parseScript(string(data)))
		})
	}
}

type scriptLine struct{ verb, rest string }

func parseScript(s string) []scriptLine {
	var lines []scriptLine
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(l, " ")
		lines = append(lines, scriptLine{verb, strings.TrimSpace(rest)})
	}
	return lines
}

func playQMP(t *testing.T, script []scriptLine) {
	g := NewWithT(t)
	qemuEnd, clientEnd := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		serveScript(t, qemuEnd, script)
	}()
	var mu sync.Mutex
	var events []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := newQMPClient(ctx, clientEnd, func(name string, data json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, name+" "+compactJSON(t, string(data)))
	})
	var result json.RawMessage
	var callErr error
	var wantEvents []string
	for _, l := range script {
		switch l.verb {
		case "dial-error":
			g.Expect(err).To(MatchError(ContainSubstring(l.rest)))
			_ = clientEnd.Close()
			<-served
			return
		case "call":
			g.Expect(err).NotTo(HaveOccurred())
			command, args, _ := strings.Cut(l.rest, " ")
			var a any
			if args != "" {
				g.Expect(json.Unmarshal([]byte(args), &a)).To(Succeed())
			}
			result = nil
			callErr = c.execute(ctx, command, a, &result)
		case "returns":
			g.Expect(callErr).NotTo(HaveOccurred())
			g.Expect(string(result)).To(MatchJSON(l.rest))
		case "error":
			g.Expect(callErr).To(MatchError(ContainSubstring(l.rest)))
		case "event":
			name, data, _ := strings.Cut(l.rest, " ")
			wantEvents = append(wantEvents, name+" "+compactJSON(t, data))
		}
	}
	<-served
	g.Expect(c.Close()).To(Or(Succeed(), HaveOccurred()))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(events).To(Equal(wantEvents))
}

// serveScript plays QEMU's side.
func serveScript(t *testing.T, conn net.Conn, script []scriptLine) {
	r := bufio.NewReader(conn)
	for _, l := range script {
		switch {
		case l.verb == "<" && l.rest == "EOF":
			_ = conn.Close()
			return
		case l.verb == "<":
			if _, err := conn.Write([]byte(l.rest + "\n")); err != nil {
				t.Errorf("sending %s: %v", l.rest, err)
				return
			}
		case l.verb == ">":
			got, err := r.ReadString('\n')
			if err != nil {
				t.Errorf("waiting for %s: %v", l.rest, err)
				return
			}
			if compactJSON(t, got) != compactJSON(t, l.rest) {
				t.Errorf("the client sent %s, want %s", strings.TrimSpace(got), l.rest)
				return
			}
		}
	}
}

// compactJSON is s re-encoded with sorted keys, for comparison.
func compactJSON(t *testing.T, s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// FuzzQMPRead feeds the reader whatever QEMU might send: it must neither
// panic nor hang, and it stops at the first message it cannot read.
func FuzzQMPRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/qmp/*.txt")
	for _, file := range files {
		data, _ := os.ReadFile(file)
		var sent []string
		for _, l := range parseScript(string(data)) {
			if l.verb == "<" && l.rest != "EOF" {
				sent = append(sent, l.rest)
			}
		}
		f.Add([]byte(strings.Join(sent, "\n")))
	}
	f.Add([]byte(`{"return": {}, "id": 1}` + "\n" + `{"event": "SHUTDOWN", "data": {"reason": "guest-reset"}}`))
	f.Add([]byte(`{"id": "one"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		reply := make(chan qmpMessage, 1)
		c := &qmpClient{pending: map[int]chan qmpMessage{1: reply}, done: make(chan struct{}),
			onEvent: func(string, json.RawMessage) {}}
		c.read(bufio.NewReader(bytes.NewReader(data)))
		<-c.done
		if c.err == nil {
			t.Fatal("the reader stopped without saying why")
		}
	})
}
