package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// qmpClient speaks QMP, the QEMU Machine Protocol, on one connection: QEMU
// greets, the client sends qmp_capabilities, then commands are answered in
// order (each reply carries the command's id) with events in between.
type qmpClient struct {
	conn    io.ReadWriteCloser
	onEvent func(name string, data json.RawMessage)

	send   sync.Mutex // one command at a time
	nextID int

	mu      sync.Mutex
	pending map[int]chan qmpMessage
	err     error         // why the reader stopped
	done    chan struct{} // closed when the reader stops
}

// qmpMessage is any message QEMU sends.
type qmpMessage struct {
	QMP    json.RawMessage `json:"QMP,omitempty"`
	Return json.RawMessage `json:"return,omitempty"`
	Error  *QMPError       `json:"error,omitempty"`
	Event  string          `json:"event,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	ID     *int            `json:"id,omitempty"`
}

// QMPError is an error QEMU answered a command with.
type QMPError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *QMPError) Error() string { return e.Class + ": " + e.Desc }

// errQMPClosed is returned by commands once the connection is gone (QEMU exited).
var errQMPClosed = errors.New("the QMP connection is closed")

// dialQMP connects to QEMU's QMP unix socket at path and negotiates
// capabilities; onEvent, when set, gets every event in the order QEMU sent
// them, on the reader's goroutine.
func dialQMP(ctx context.Context, path string, onEvent func(string, json.RawMessage)) (*qmpClient, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	c, err := newQMPClient(ctx, conn, onEvent)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

// newQMPClient reads QEMU's greeting from conn and negotiates capabilities.
func newQMPClient(ctx context.Context, conn io.ReadWriteCloser, onEvent func(string, json.RawMessage)) (*qmpClient, error) {
	c := &qmpClient{conn: conn, onEvent: onEvent, pending: map[int]chan qmpMessage{}, done: make(chan struct{})}
	r := bufio.NewReaderSize(conn, 64<<10)
	var greeting qmpMessage
	if err := readQMP(r, &greeting); err != nil {
		return nil, fmt.Errorf("reading the QMP greeting: %w", err)
	}
	if greeting.QMP == nil {
		return nil, fmt.Errorf("QEMU did not greet with QMP")
	}
	go c.read(r)
	if err := c.execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// readQMP reads one message (QEMU writes one JSON object per line).
func readQMP(r *bufio.Reader, msg *qmpMessage) error {
	line, err := r.ReadBytes('\n')
	if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
		return err
	}
	*msg = qmpMessage{}
	if err := json.Unmarshal(line, msg); err != nil {
		return fmt.Errorf("QEMU sent %q: %w", truncate(line, 200), err)
	}
	return nil
}

func (c *qmpClient) read(r *bufio.Reader) {
	var err error
	for err == nil {
		var msg qmpMessage
		if err = readQMP(r, &msg); err != nil {
			break
		}
		switch {
		case msg.Event != "":
			if c.onEvent != nil {
				c.onEvent(msg.Event, msg.Data)
			}
		case msg.ID != nil:
			c.mu.Lock()
			ch := c.pending[*msg.ID]
			delete(c.pending, *msg.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- msg
			}
		}
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

// execute runs command with args (nil for none) and decodes its return
// value into result (nil to ignore it). Errors from QEMU are *QMPError.
func (c *qmpClient) execute(ctx context.Context, command string, args, result any) error {
	c.send.Lock()
	defer c.send.Unlock()
	c.nextID++
	id := c.nextID
	ch := make(chan qmpMessage, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	req := map[string]any{"execute": command, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := c.conn.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("QMP %s: %w (%v)", command, errQMPClosed, err)
	}
	select {
	case msg := <-ch:
		return reply(command, msg, result)
	case <-c.done:
		select {
		case msg := <-ch: // the reader delivers before it stops
			return reply(command, msg, result)
		default:
			return fmt.Errorf("QMP %s: %w", command, errQMPClosed)
		}
	case <-ctx.Done():
		return fmt.Errorf("QMP %s: %w", command, ctx.Err())
	}
}

func reply(command string, msg qmpMessage, result any) error {
	if msg.Error != nil {
		return fmt.Errorf("QMP %s: %w", command, msg.Error)
	}
	if result != nil && msg.Return != nil {
		return json.Unmarshal(msg.Return, result)
	}
	return nil
}

// Close closes the connection and waits for the reader.
func (c *qmpClient) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
