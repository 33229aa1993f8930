// Package validations computes the host and cluster validations of the
// agent service: the checks whose IDs, categories, statuses and messages the
// Agent's and AgentClusterInstall's status.validationsInfo show, with the
// IDs and message texts of the upstream assisted service. Everything here is
// a pure function of plain inputs: no Kubernetes client, no clock.
package validations

import (
	"sort"

	"github.com/metalshift/metalshift/api/assistedcommon"
)

// Status is the outcome of one validation.
type Status string

// Validation statuses (upstream's).
const (
	StatusSuccess  Status = "success"
	StatusFailure  Status = "failure"
	StatusPending  Status = "pending"
	StatusError    Status = "error"
	StatusDisabled Status = "disabled"
)

// Categories of validations.
const (
	CategoryNetwork       = "network"
	CategoryHardware      = "hardware"
	CategoryOperators     = "operators"
	CategoryHostsData     = "hosts-data"
	CategoryConfiguration = "configuration"
)

// Result is one validation's outcome; its JSON is that of the CRDs'
// ValidationResult.
type Result struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

// Results maps a category to its results, sorted by ID.
type Results map[string][]Result

// Status is r as a status.validationsInfo, of an Agent or of an
// AgentClusterInstall alike.
func (r Results) Status() assistedcommon.ValidationsStatus {
	out := assistedcommon.ValidationsStatus{}
	for cat, rs := range r {
		list := assistedcommon.ValidationsResults{}
		for _, v := range rs {
			list = append(list, assistedcommon.ValidationResult{ID: v.ID, Status: v.Status, Message: v.Message})
		}
		out[cat] = list
	}
	return out
}

// Failing returns the results that failed or could not be evaluated
// (failure or error), in category then ID order.
func (r Results) Failing() []Result {
	return r.filter(func(s string) bool { return s == string(StatusFailure) || s == string(StatusError) })
}

// Pending returns the results still waiting for input.
func (r Results) Pending() []Result {
	return r.filter(func(s string) bool { return s == string(StatusPending) })
}

// Passing tells whether nothing is failing or pending.
func (r Results) Passing() bool { return len(r.Failing()) == 0 && len(r.Pending()) == 0 }

// NotSucceeded returns the results whose status is neither success nor
// disabled: what the Validated conditions list.
func (r Results) NotSucceeded() []Result {
	return r.filter(func(s string) bool { return s != string(StatusSuccess) && s != string(StatusDisabled) })
}

// Get returns the result of a validation.
func (r Results) Get(id string) (Result, bool) {
	for _, list := range r {
		for _, res := range list {
			if res.ID == id {
				return res, true
			}
		}
	}
	return Result{}, false
}

// Succeeded tells whether validation id is present and succeeded (or is
// disabled, which upstream counts as passing). An absent validation
// counts as passing: upstream leaves out the ones it does not apply.
func (r Results) Succeeded(id string) bool {
	res, ok := r.Get(id)
	return !ok || res.Status == string(StatusSuccess) || res.Status == string(StatusDisabled)
}

// Categories returns the categories present, sorted.
func (r Results) Categories() []string {
	out := make([]string, 0, len(r))
	for c := range r {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func (r Results) filter(keep func(string) bool) []Result {
	var out []Result
	for _, c := range r.Categories() {
		for _, res := range r[c] {
			if keep(res.Status) {
				out = append(out, res)
			}
		}
	}
	return out
}

// add appends a result to its category.
func (r Results) add(category, id string, s Status, msg string) {
	r[category] = append(r[category], Result{ID: id, Status: string(s), Message: msg})
}

// sorted sorts every category by ID.
func (r Results) sorted() Results {
	for c := range r {
		sort.SliceStable(r[c], func(i, j int) bool { return r[c][i].ID < r[c][j].ID })
	}
	return r
}

// outcome is a computed status and its message.
type outcome struct {
	status Status
	msg    string
}

func (r Results) put(category, id string, o outcome) { r.add(category, id, o.status, o.msg) }

func ok(msg string) outcome      { return outcome{StatusSuccess, msg} }
func fail(msg string) outcome    { return outcome{StatusFailure, msg} }
func pending(msg string) outcome { return outcome{StatusPending, msg} }
