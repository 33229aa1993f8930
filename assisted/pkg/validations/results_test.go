package validations

import (
	"encoding/json"
	"testing"
)

func TestResultsQueries(t *testing.T) {
	r := Results{
		"network":  {{ID: "b", Status: "pending", Message: "p"}, {ID: "a", Status: "failure", Message: "f"}},
		"hardware": {{ID: "c", Status: "error", Message: "e"}, {ID: "d", Status: "success"}, {ID: "e", Status: "disabled"}},
	}
	if got := r.Failing(); len(got) != 2 || got[0].ID != "c" || got[1].ID != "a" {
		t.Errorf("Failing = %+v", got)
	}
	if got := r.Pending(); len(got) != 1 || got[0].ID != "b" {
		t.Errorf("Pending = %+v", got)
	}
	if r.Passing() {
		t.Error("Passing with failures")
	}
	if got := r.NotSucceeded(); len(got) != 3 {
		t.Errorf("NotSucceeded = %+v", got)
	}
	if !r.Succeeded("d") || !r.Succeeded("e") || !r.Succeeded("absent") || r.Succeeded("b") {
		t.Error("Succeeded")
	}
	if !(Results{"x": {{ID: "a", Status: "success"}}}).Passing() {
		t.Error("all success not passing")
	}
}

func TestResultJSONMatchesCRD(t *testing.T) {
	data, err := json.Marshal(Result{ID: "connected", Status: "success", Message: "Host is connected"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"connected","status":"success","message":"Host is connected"}`; string(data) != want {
		t.Errorf("got %s, want %s", data, want)
	}
}
