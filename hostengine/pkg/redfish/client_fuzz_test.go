package redfish

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The fuzzed BMC is at fuzzOrigin; fuzzPassword is its password.
const (
	fuzzOrigin   = "https://192.0.2.10:8443"
	fuzzPassword = "pa55-FUZZ-7f1c"
	// maxFuzzReply is more than any Redfish client should read of one
	// reply (they are kilobytes): a client reading past it has no cap.
	maxFuzzReply = 32 << 20
)

// scriptedBMC is a BMC answering from a script, one line per resource:
// "<status> <path> <Location or -> <body>". A request for a path the
// script has no line for gets 404. A '~' in a body stands for pad bytes
// of 'x' (a large reply), produced as the client reads.
type scriptedBMC struct {
	lines map[string][3]string
	pad   int

	mu       sync.Mutex
	requests []string // method and URL
	offsite  []string // requests elsewhere than fuzzOrigin
	read     int64    // body bytes the client read
	overrun  bool     // a reply was read past maxFuzzReply
}

func newScriptedBMC(script string, pad int) *scriptedBMC {
	b := &scriptedBMC{lines: map[string][3]string{}, pad: pad}
	for _, line := range strings.Split(script, "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) < 3 {
			continue
		}
		if len(f) == 3 {
			f = append(f, "")
		}
		if _, dup := b.lines[f[1]]; !dup {
			b.lines[f[1]] = [3]string{f[0], f[2], f[3]}
		}
	}
	return b
}

func (b *scriptedBMC) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	b.mu.Lock()
	b.requests = append(b.requests, req.Method+" "+req.URL.String())
	if req.URL.Scheme+"://"+req.URL.Host != fuzzOrigin {
		b.offsite = append(b.offsite, fmt.Sprintf("%s %s (Authorization %q, X-Auth-Token %q)",
			req.Method, req.URL, req.Header.Get("Authorization"), req.Header.Get("X-Auth-Token")))
	}
	b.mu.Unlock()
	resp := &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{}, Request: req, ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(strings.NewReader(`{"error":{"message":"no such resource"}}`))}
	line, ok := b.lines[req.URL.Path]
	if !ok {
		return resp, nil
	}
	if code, err := strconv.Atoi(line[0]); err == nil && code >= 100 && code <= 599 {
		resp.StatusCode = code
	}
	if line[1] != "-" {
		resp.Header.Set("Location", line[1])
	}
	resp.Header.Set("X-Auth-Token", "session-token")
	resp.Header.Set("ETag", `W/"1"`)
	resp.Body = &paddedBody{bmc: b, r: bufio.NewReader(strings.NewReader(line[2])), pad: b.pad}
	return resp, nil
}

// paddedBody is a reply body with each '~' expanded to pad 'x' bytes.
type paddedBody struct {
	bmc  *scriptedBMC
	r    *bufio.Reader
	pad  int
	left int // 'x' bytes still to give for the current '~'
	n    int64
}

func (p *paddedBody) Read(out []byte) (int, error) {
	n := 0
	for n < len(out) {
		if p.left > 0 {
			k := min(p.left, len(out)-n)
			copy(out[n:n+k], bytes.Repeat([]byte{'x'}, k))
			n, p.left = n+k, p.left-k
			continue
		}
		c, err := p.r.ReadByte()
		if err != nil {
			if n == 0 {
				return 0, err
			}
			break
		}
		if c == '~' {
			p.left = p.pad
			continue
		}
		out[n] = c
		n++
	}
	p.n += int64(n)
	p.bmc.mu.Lock()
	p.bmc.read += int64(n)
	if p.n > maxFuzzReply {
		p.bmc.overrun = true
	}
	p.bmc.mu.Unlock()
	if p.n > maxFuzzReply {
		return n, errors.New("the client read past the fuzzed BMC's limit")
	}
	return n, nil
}

func (p *paddedBody) Close() error { return nil }

// redfishScript is a BMC as the simulator and real ones answer: a system
// with a NIC, a drive and a virtual CD holding an old image.
const redfishScript = `201 /redfish/v1/SessionService/Sessions /redfish/v1/SessionService/Sessions/1 {}
200 /redfish/v1/Systems - {"Members":[{"@odata.id":"/redfish/v1/Systems/1"}]}
200 /redfish/v1/Systems/1 - {"@odata.id":"/redfish/v1/Systems/1","Id":"1","PowerState":"Off","Boot":{"BootSourceOverrideTarget":"None"},"EthernetInterfaces":{"@odata.id":"/redfish/v1/Systems/1/EthernetInterfaces"},"Storage":{"@odata.id":"/redfish/v1/Systems/1/Storage"},"Processors":{"@odata.id":"/redfish/v1/Systems/1/Processors"},"Links":{"ManagedBy":[{"@odata.id":"/redfish/v1/Managers/1"}]}}
200 /redfish/v1/Systems/1/EthernetInterfaces - {"Members":[{"@odata.id":"/redfish/v1/Systems/1/EthernetInterfaces/1"}]}
200 /redfish/v1/Systems/1/EthernetInterfaces/1 - {"Id":"1","MACAddress":"52:54:00:aa:bb:01","SpeedMbps":25000}
200 /redfish/v1/Systems/1/Processors - {"Members":[{"@odata.id":"/redfish/v1/Systems/1/Processors/1"}]}
200 /redfish/v1/Systems/1/Processors/1 - {"ProcessorArchitecture":"x86","InstructionSet":"x86-64","TotalThreads":8}
200 /redfish/v1/Systems/1/Storage - {"Members":[{"@odata.id":"/redfish/v1/Systems/1/Storage/1"}]}
200 /redfish/v1/Systems/1/Storage/1 - {"Drives":[{"@odata.id":"/redfish/v1/Systems/1/Storage/1/Drives/1"}]}
200 /redfish/v1/Systems/1/Storage/1/Drives/1 - {"Id":"1","CapacityBytes":1099511627776,"MediaType":"SSD"}
200 /redfish/v1/Managers/1 - {"VirtualMedia":{"@odata.id":"/redfish/v1/Managers/1/VirtualMedia"}}
200 /redfish/v1/Managers/1/VirtualMedia - {"Members":[{"@odata.id":"/redfish/v1/Managers/1/VirtualMedia/Cd"}]}
200 /redfish/v1/Managers/1/VirtualMedia/Cd - {"MediaTypes":["CD","DVD"],"Inserted":true,"Image":"http://old/live.iso"}
202 /redfish/v1/Managers/1/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia /redfish/v1/TaskService/Tasks/1 {}
200 /redfish/v1/TaskService/Tasks/1 - {"TaskState":"Exception","Messages":[{"Message":"drive busy"}]}
204 /redfish/v1/Systems/1/Actions/ComputerSystem.Reset - 
200 /redfish/v1/SessionService/Sessions/1 - {}`

// FuzzClient runs the engine's Redfish operations (systems, inventory,
// virtual media, boot override, reset, task monitors, logout) against a
// BMC whose every reply the fuzzer writes, and checks the promises a
// client of a BMC on the provisioning network must keep whatever the BMC
// answers: no request leaves the BMC's origin (not by an absolute
// @odata.id, a Location, a task monitor, a session URI or a redirect), so
// the credentials never go elsewhere; no reply is read past
// maxFuzzReply, and allocation stays within a constant factor of what was
// read; no error shows the password.
//
// The BMC's caps (reply size, members) are the client's to choose: the
// bounds here are generous. testdata/fuzz/FuzzClient holds BMCs that link,
// redirect or move a session off their origin, and one whose reply never
// ends.
func FuzzClient(f *testing.F) {
	f.Add(redfishScript, uint16(0))
	f.Add(strings.ReplaceAll(redfishScript, `"Id":"1","MACAddress"`, `"Id":"~","MACAddress"`), uint16(64))
	f.Add(strings.ReplaceAll(redfishScript, "201 /redfish/v1/SessionService/Sessions /redfish/v1/SessionService/Sessions/1", "404 /redfish/v1/SessionService/Sessions -"), uint16(0))
	// Absolute links on the BMC's own origin, as many BMCs write Location.
	f.Add(strings.NewReplacer(" /redfish/v1/SessionService/Sessions/1 ", " "+fuzzOrigin+"/redfish/v1/SessionService/Sessions/1 ",
		" /redfish/v1/TaskService/Tasks/1 ", " "+fuzzOrigin+"/redfish/v1/TaskService/Tasks/1 ",
		`"@odata.id":"/redfish/v1/Systems/1/EthernetInterfaces/1"`, `"@odata.id":"`+fuzzOrigin+`/redfish/v1/Systems/1/EthernetInterfaces/1"`).Replace(redfishScript), uint16(0))
	f.Add("401 /redfish/v1/SessionService/Sessions - {\"error\":{\"message\":\"bad password\"}}", uint16(0))
	f.Add("200 /redfish/v1/Systems - {\"Members\":[{},{},{}]}\n500 /redfish/v1/Systems/1 - {\"error\":{\"@Message.ExtendedInfo\":[{\"Message\":\"~\"}]}}", uint16(8))
	f.Add("200 /redfish/v1/Systems - {\"Members\":null}\n200 /redfish/v1/Systems/1 - [1,2,3]", uint16(0))
	f.Fuzz(func(t *testing.T, script string, padKiB uint16) {
		bmc := newScriptedBMC(script, int(padKiB)<<10)
		c, err := New(Options{Endpoint: fuzzOrigin, Username: "admin", Password: fuzzPassword})
		if err != nil {
			t.Fatal(err)
		}
		// The scripted BMC answers in memory, behind the client's own
		// redirect and origin rules.
		c.http.Transport = bmc
		ctx := context.Background()
		var errs []error
		note := func(err error) {
			if err != nil {
				errs = append(errs, err)
			}
		}
		n := allocated(func() {
			paths, err := c.SystemPaths(ctx)
			note(err)
			sysPath := "/redfish/v1/Systems/1"
			if len(paths) > 0 && paths[0] != "" {
				sysPath = paths[0]
			}
			_, err = c.Inventory(ctx, sysPath)
			note(err)
			sys, _, err := c.System(ctx, sysPath)
			note(err)
			cd := "/redfish/v1/Managers/1/VirtualMedia/Cd"
			if sys != nil {
				if p, err := c.CDPath(ctx, sys); err == nil {
					cd = p
				} else {
					note(err)
				}
			}
			for _, op := range []func() (string, error){
				func() (string, error) { return c.InsertMedia(ctx, cd, "https://192.0.2.1/live.iso") },
				func() (string, error) {
					return c.SetBoot(ctx, sysPath, Boot{BootSourceOverrideTarget: "Cd", BootSourceOverrideEnabled: "Once"})
				},
				func() (string, error) { return c.Reset(ctx, sysPath, ResetOn) },
			} {
				monitor, err := op()
				note(err)
				if monitor != "" {
					_, err := c.Task(ctx, monitor)
					note(err)
				}
			}
			note(c.Close(ctx))
		})
		bmc.mu.Lock()
		defer bmc.mu.Unlock()
		if len(bmc.offsite) > 0 {
			t.Fatalf("the client left the BMC's origin %s: %v", fuzzOrigin, bmc.offsite)
		}
		if bmc.overrun {
			t.Fatalf("the client read a reply past %d bytes", maxFuzzReply)
		}
		if limit := uint64(32*bmc.read) + uint64(len(bmc.requests))<<16 + 16<<20; n > limit {
			t.Fatalf("%d requests reading %d bytes allocated %d bytes, more than %d", len(bmc.requests), bmc.read, n, limit)
		}
		if !strings.Contains(script, fuzzPassword) {
			for _, err := range errs {
				if strings.Contains(err.Error(), fuzzPassword) {
					t.Fatalf("an error shows the password: %v", err)
				}
			}
		}
	})
}

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
