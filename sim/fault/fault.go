// Package fault is the simulator's fault plan: which faults the emulators
// (the Redfish BMCs, the IPMI BMCs, the machines, the Equinix Metal API
// and its devices) inject, when, and with which seed. One syntax serves
// the `metalshift sim bmc --faults` and `metalshift sim equinix --faults`
// flags and in-process tests (sim.LabOptions.Faults,
// sim/equinix.Options.Faults):
//
//	seed=1234,redfish.5xx=10%,redfish.hang[host-1]=@3,machine.netdrop=5-:20s
//
// Each emulator asks, at the point where the fault would happen (a request
// arriving, a power action, an image write, an HTTP call of a machine),
// for a decision: Plan.For(id).Decide(kind). Decisions are counted and
// drawn per emulator ID and kind — every BMC and machine has its own
// random source, derived from the seed, its ID and the kind — so a BMC's
// sequence of faults depends only on the order of its own requests, not
// on what other BMCs do at the same time, nor on the other kinds of the
// plan. The same plan with the same seed replays the same faults.
package fault

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind names a fault.
type Kind string

// The kinds of faults. What counts as one decision (the "request" of a
// schedule) is said for each.
const (
	// Redfish5xx answers a Redfish request with a 5xx error (the
	// parameter: the status, default 500). A decision per request.
	Redfish5xx Kind = "redfish.5xx"
	// RedfishHang holds a Redfish request without an answer until the
	// client gives up (the request's context ends), or at most the
	// parameter (default 10m). A decision per request.
	RedfishHang Kind = "redfish.hang"
	// RedfishReset closes the connection of a Redfish request without an
	// answer (a TCP reset). A decision per request.
	RedfishReset Kind = "redfish.reset"
	// RedfishSlowPower accepts a power action (ComputerSystem.Reset) at
	// once but changes the power state only after the parameter (default
	// 10s). A decision per power action.
	RedfishSlowPower Kind = "redfish.slowpower"
	// RedfishMedia fails a virtual-media insert (VirtualMedia.InsertMedia)
	// with a 500 GeneralError; the drive stays empty. A decision per
	// insert.
	RedfishMedia Kind = "redfish.media"
	// RedfishTask answers a power action with a task monitor that never
	// finishes (it stays Running) and never carries the action out. A
	// decision per power action.
	RedfishTask Kind = "redfish.task"
	// IPMIFail fails a chassis control command (power on, off, reset,
	// boot device) of an IPMI BMC: it is not carried out and the BMC
	// answers with an error completion code. A decision per command.
	IPMIFail Kind = "ipmi.fail"
	// IPMIDrop drops the reply to a chassis control command of an IPMI
	// BMC: the command is not carried out and the client hears nothing
	// until it gives up. With ipmi_sim the whole BMC hangs meanwhile (it
	// waits for its chassis control program): it answers no command for
	// a while (sim/ipmi.DropFor), then processes what queued up. A
	// decision per command.
	IPMIDrop Kind = "ipmi.drop"
	// IPMIIgnore acknowledges a chassis control command of an IPMI BMC
	// without carrying it out: ipmi_sim answers success, and the power
	// or the boot device stays as it was (as a BMC that acknowledges a
	// command before acting and then does not). A decision per command.
	IPMIIgnore Kind = "ipmi.ignore"
	// MachinePowerLoss cuts a machine's power while the deploy agent
	// writes an image: the write stops after the parameter's bytes
	// (default 512KiB) and the machine is off. A decision per image write
	// (the agent's write at the start of the disk).
	MachinePowerLoss Kind = "machine.powerloss"
	// MachineNetDrop drops a machine's network for the parameter (default
	// 10s) from the call it fires on: the machine's HTTP calls (network
	// boot, its agents) fail while it lasts. A decision per HTTP call of
	// the machine made while its network is up.
	MachineNetDrop Kind = "machine.netdrop"
	// MachineDownloadDrop drops a machine's network for the parameter
	// (default 10s) in the middle of a download: once the first MiB of
	// the response's body was read, the transfer breaks and the machine's
	// HTTP calls fail while it lasts. A decision per answer of at least 2
	// MiB (by its Content-Length) to an HTTP call of the machine, such as
	// the deploy agent's image download, whatever calls came before it.
	MachineDownloadDrop Kind = "machine.downloaddrop"
	// Equinix5xx answers a request to the Equinix Metal emulator's API
	// with a 5xx error (the parameter: the status, default 500) and does
	// nothing. A decision per authenticated request, on the emulator's
	// endpoint (sim/equinix.EndpointID).
	Equinix5xx Kind = "equinix.5xx"
	// EquinixSlowProvision makes a device of the Equinix Metal emulator
	// provision longer by the parameter (default 5m). A decision per
	// provisioning (a create or a reinstall), on the device's hostname.
	EquinixSlowProvision Kind = "equinix.slowprovision"
	// EquinixNoHardware refuses a device create with 422 "no available
	// hardware" and creates nothing. A decision per create, on the
	// hostname asked for.
	EquinixNoHardware Kind = "equinix.nohardware"
	// EquinixFailed makes a device end failed instead of active: its
	// provisioning never reaches a machine. A decision per provisioning
	// (a create or a reinstall), on the device's hostname.
	EquinixFailed Kind = "equinix.failed"
)

// param is what a kind's parameter is.
type param int

const (
	paramNone param = iota
	paramStatus
	paramDuration
	paramSize
)

type kindInfo struct {
	param param
	def   string // the default parameter
}

var kinds = map[Kind]kindInfo{
	Redfish5xx:       {paramStatus, "500"},
	RedfishHang:      {paramDuration, "10m"},
	RedfishReset:     {paramNone, ""},
	RedfishSlowPower: {paramDuration, "10s"},
	RedfishMedia:     {paramNone, ""},
	RedfishTask:      {paramNone, ""},
	IPMIFail:         {paramNone, ""},
	IPMIDrop:         {paramNone, ""},
	IPMIIgnore:       {paramNone, ""},
	MachinePowerLoss: {paramSize, "512KiB"},
	MachineNetDrop:   {paramDuration, "10s"},

	MachineDownloadDrop: {paramDuration, "10s"},

	Equinix5xx:           {paramStatus, "500"},
	EquinixSlowProvision: {paramDuration, "5m"},
	EquinixNoHardware:    {paramNone, ""},
	EquinixFailed:        {paramNone, ""},
}

// Kinds returns every kind, sorted.
func Kinds() []Kind {
	ks := make([]Kind, 0, len(kinds))
	for k := range kinds {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Rule is when a kind fires, and with what.
type Rule struct {
	Kind Kind
	// Target, when set, is the only emulator ID the rule is for; a rule
	// for an ID wins over the kind's rule for every ID.
	Target string
	// Percent, when above 0, fires each decision with this probability
	// (in percent, up to 100).
	Percent float64
	// From and To fire the decisions numbered From through To (counting
	// from 1), when Percent is 0; To 0 means every decision from From on.
	From, To int
	// Param is the parameter as written ("" for the kind's default).
	Param string

	status   int
	duration time.Duration
	size     int64
}

type ruleKey struct {
	kind   Kind
	target string
}

// Plan is a parsed fault plan. A nil *Plan injects nothing. It is safe
// for concurrent use.
type Plan struct {
	// Seed derives every random source of the plan.
	Seed uint64
	// SeedSet says the seed was given (Parse) or chosen (EnsureSeed).
	SeedSet bool
	// Logf, when set, is told of every fault that fires.
	Logf func(format string, args ...any)

	rules map[ruleKey]Rule

	mu       sync.Mutex
	deciders map[string]*Decider
	fired    map[Kind]int
}

// Parse reads a plan: items separated by commas, semicolons or spaces,
// each "seed=<n>" or "<kind>[\[<id>\]]=<when>[:<param>]" (with [<id>], for
// the emulator with that ID only: a BMC's or a machine's name), where
// <when> is
//
//	<p>%    each decision with probability p percent (0 < p <= 100)
//	@<n>    the n-th decision only (counting from 1)
//	<n>-<m> the n-th through the m-th decision
//	<n>-    every decision from the n-th on
//
// and <param> a status (redfish.5xx, equinix.5xx), a duration
// (redfish.hang, redfish.slowpower, machine.netdrop,
// equinix.slowprovision: 5s, 1m30s) or a size
// (machine.powerloss: 4096, 64KiB, 1MiB). An empty plan injects nothing.
// Errors name the item at fault.
func Parse(s string) (*Plan, error) {
	p := &Plan{rules: map[ruleKey]Rule{}}
	items := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' })
	for _, item := range items {
		key, value, ok := strings.Cut(item, "=")
		if !ok || value == "" {
			return nil, fmt.Errorf("fault plan item %q: want seed=<n> or <kind>=<when>[:<param>]", item)
		}
		if key == "seed" {
			if p.SeedSet {
				return nil, fmt.Errorf("fault plan item %q: the seed is given twice", item)
			}
			seed, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("fault plan item %q: the seed is not a number from 0 to %d", item, uint64(math.MaxUint64))
			}
			p.Seed, p.SeedSet = seed, true
			continue
		}
		kind, target := key, ""
		if i := strings.IndexByte(key, '['); i >= 0 {
			if !strings.HasSuffix(key, "]") || i+2 >= len(key) || strings.ContainsAny(key[i+1:len(key)-1], "[]") {
				return nil, fmt.Errorf("fault plan item %q: want <kind>[<id>] to name one emulator", item)
			}
			kind, target = key[:i], key[i+1:len(key)-1]
		}
		r, err := parseRule(Kind(kind), value)
		if err != nil {
			return nil, fmt.Errorf("fault plan item %q: %w", item, err)
		}
		r.Target = target
		if _, dup := p.rules[ruleKey{r.Kind, target}]; dup {
			return nil, fmt.Errorf("fault plan item %q: %s is planned twice", item, key)
		}
		p.rules[ruleKey{r.Kind, target}] = r
	}
	return p, nil
}

func parseRule(k Kind, value string) (Rule, error) {
	info, ok := kinds[k]
	if !ok {
		names := make([]string, 0, len(kinds))
		for _, k := range Kinds() {
			names = append(names, string(k))
		}
		return Rule{}, fmt.Errorf("unknown kind %q (kinds: %s)", k, strings.Join(names, ", "))
	}
	r := Rule{Kind: k}
	when, prm, hasParam := strings.Cut(value, ":")
	switch {
	case strings.HasSuffix(when, "%"):
		pct, err := strconv.ParseFloat(strings.TrimSuffix(when, "%"), 64)
		if err != nil || math.IsNaN(pct) || pct <= 0 || pct > 100 {
			return Rule{}, fmt.Errorf("rate %q: want a percentage above 0 and at most 100, e.g. 10%%", when)
		}
		r.Percent = pct
	case strings.HasPrefix(when, "@"):
		n, err := strconv.Atoi(when[1:])
		if err != nil || n < 1 {
			return Rule{}, fmt.Errorf("schedule %q: want @<n>, n from 1", when)
		}
		r.From, r.To = n, n
	case strings.Contains(when, "-"):
		a, b, _ := strings.Cut(when, "-")
		from, err := strconv.Atoi(a)
		if err != nil || from < 1 {
			return Rule{}, fmt.Errorf("schedule %q: want <n>-<m> or <n>-, n from 1", when)
		}
		r.From = from
		if b != "" {
			to, err := strconv.Atoi(b)
			if err != nil || to < from {
				return Rule{}, fmt.Errorf("schedule %q: want <n>-<m> with m at least n", when)
			}
			r.To = to
		}
	default:
		return Rule{}, fmt.Errorf("%q is neither a rate (10%%) nor a schedule (@3, 2-5, 4-)", when)
	}
	if hasParam {
		if info.param == paramNone {
			return Rule{}, fmt.Errorf("%s takes no parameter, got %q", k, prm)
		}
		if prm == "" {
			return Rule{}, fmt.Errorf("empty parameter after %q", when+":")
		}
		r.Param = prm
	}
	if err := r.resolve(info); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// resolve reads the rule's parameter, or the kind's default.
func (r *Rule) resolve(info kindInfo) error {
	prm := r.Param
	if prm == "" {
		prm = info.def
	}
	switch info.param {
	case paramStatus:
		n, err := strconv.Atoi(prm)
		if err != nil || n < 500 || n > 599 {
			return fmt.Errorf("status %q: want 500 to 599", prm)
		}
		r.status = n
	case paramDuration:
		d, err := time.ParseDuration(prm)
		if err != nil || d <= 0 {
			return fmt.Errorf("duration %q: want a positive duration, e.g. 30s", prm)
		}
		r.duration = d
	case paramSize:
		n, err := parseSize(prm)
		if err != nil {
			return fmt.Errorf("size %q: %w", prm, err)
		}
		r.size = n
	}
	return nil
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, errors.New("want bytes, optionally with KiB, MiB or GiB, e.g. 1MiB")
	}
	return n * mult, nil
}

// MustParse is Parse for plans written in code; it panics on an error.
func MustParse(s string) *Plan {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the plan in Parse's syntax, its rules sorted by kind:
// Parse(p.String()) is the same plan.
func (p *Plan) String() string {
	if p == nil {
		return ""
	}
	var items []string
	if p.SeedSet {
		items = append(items, "seed="+strconv.FormatUint(p.Seed, 10))
	}
	for _, r := range p.Rules() {
		key := string(r.Kind)
		if r.Target != "" {
			key += "[" + r.Target + "]"
		}
		items = append(items, key+"="+r.String())
	}
	return strings.Join(items, ",")
}

// String returns the rule's <when>[:<param>].
func (r Rule) String() string {
	var s string
	switch {
	case r.Percent > 0:
		s = strconv.FormatFloat(r.Percent, 'g', -1, 64) + "%"
	case r.From == r.To:
		s = "@" + strconv.Itoa(r.From)
	case r.To == 0:
		s = strconv.Itoa(r.From) + "-"
	default:
		s = strconv.Itoa(r.From) + "-" + strconv.Itoa(r.To)
	}
	if r.Param != "" {
		s += ":" + r.Param
	}
	return s
}

// Rules returns the plan's rules sorted by kind, then ID.
func (p *Plan) Rules() []Rule {
	if p == nil {
		return nil
	}
	rs := make([]Rule, 0, len(p.rules))
	for _, r := range p.rules {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b Rule) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Target, b.Target)
	})
	return rs
}

// Has says whether the plan has a rule for k, for any emulator.
func (p *Plan) Has(k Kind) bool {
	if p == nil {
		return false
	}
	for key := range p.rules {
		if key.kind == k {
			return true
		}
	}
	return false
}

// Empty says whether the plan injects nothing.
func (p *Plan) Empty() bool { return p == nil || len(p.rules) == 0 }

// EnsureSeed chooses a random seed unless one is set, and says whether it
// did: a caller then prints it, so that a failing run can be replayed.
func (p *Plan) EnsureSeed() bool {
	if p == nil || p.SeedSet {
		return false
	}
	p.Seed, p.SeedSet = rand.Uint64(), true //nolint:gosec // a replayable seed, not a secret
	return true
}

// For returns the decider of the emulator with id (a BMC, a machine): the
// same one on every call. A nil plan returns a nil Decider, which decides
// nothing.
func (p *Plan) For(id string) *Decider {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deciders == nil {
		p.deciders = map[string]*Decider{}
	}
	d := p.deciders[id]
	if d == nil {
		d = &Decider{plan: p, id: id, kinds: map[Kind]*kindState{}}
		p.deciders[id] = d
	}
	return d
}

// Fired counts the decisions of kind k that fired, over every emulator
// (one that an emulator overrode with a fault of higher precedence, such
// as a Redfish reset over a 5xx on the same request, included).
func (p *Plan) Fired(k Kind) int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fired[k]
}

func (p *Plan) record(id string, f Fault) {
	p.mu.Lock()
	if p.fired == nil {
		p.fired = map[Kind]int{}
	}
	p.fired[f.Kind]++
	logf := p.Logf
	p.mu.Unlock()
	if logf != nil {
		logf("fault: %s fired on %s (decision %d)", f.Kind, id, f.N)
	}
}

// Decider makes the decisions of one emulator. It is safe for concurrent
// use; decisions are numbered in the order Decide is called.
type Decider struct {
	plan *Plan
	id   string

	mu    sync.Mutex
	kinds map[Kind]*kindState
}

type kindState struct {
	n   int
	rng *rand.Rand
}

// Fault is a decision: the zero Fault (Fired false) injects nothing.
type Fault struct {
	Kind Kind
	// N is the number of the decision (from 1) among the emulator's
	// decisions of Kind.
	N int
	// Status is the status of redfish.5xx and equinix.5xx.
	Status int
	// Duration is the parameter of redfish.hang, redfish.slowpower,
	// machine.netdrop, machine.downloaddrop and equinix.slowprovision.
	Duration time.Duration
	// Bytes is machine.powerloss's parameter.
	Bytes int64
}

// Fired says whether the fault is injected.
func (f Fault) Fired() bool { return f.Kind != "" }

// Decide counts a decision of kind k and says whether the fault fires. A
// nil Decider, or a plan without k, never fires and draws nothing.
func (d *Decider) Decide(k Kind) Fault {
	if d == nil {
		return Fault{}
	}
	r, ok := d.plan.rules[ruleKey{k, d.id}]
	if !ok {
		if r, ok = d.plan.rules[ruleKey{k, ""}]; !ok {
			return Fault{}
		}
	}
	d.mu.Lock()
	st := d.kinds[k]
	if st == nil {
		st = &kindState{rng: rand.New(rand.NewPCG(d.plan.Seed, streamOf(d.id, k)))} //nolint:gosec // replayable faults, not secrets
		d.kinds[k] = st
	}
	st.n++
	n := st.n
	var fire bool
	if r.Percent > 0 {
		fire = st.rng.Float64()*100 < r.Percent
	} else {
		fire = n >= r.From && (r.To == 0 || n <= r.To)
	}
	d.mu.Unlock()
	if !fire {
		return Fault{}
	}
	f := Fault{Kind: k, N: n, Status: r.status, Duration: r.duration, Bytes: r.size}
	d.plan.record(d.id, f)
	return f
}

// streamOf is the random stream of an emulator's kind.
func streamOf(id string, k Kind) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(k))
	return h.Sum64()
}
