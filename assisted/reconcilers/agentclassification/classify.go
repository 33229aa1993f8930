package agentclassification

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/itchyny/gojq"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// queryErrorPrefix starts the label value of an Agent a query failed on;
// the classification controller counts every value so prefixed as an error,
// as upstream does.
const queryErrorPrefix = "QUERYERROR"

// queryTimeout bounds one run of a query on one inventory, so that a query
// that never ends (`[repeat(1)]`) fails on the Agent instead of holding a
// worker of the controller.
const queryTimeout = time.Second

// Errors of a query that does not yield exactly one value (upstream's texts).
var (
	errNoValue        = errors.New("Expected boolean, found no values")       //nolint:staticcheck // upstream's text
	errMultipleValues = errors.New("Expected boolean, found multiple values") //nolint:staticcheck // upstream's text
)

// LabelKey is the label an AgentClassification sets on the Agents it
// classifies.
func LabelKey(c *agentinstallv1.AgentClassification) string {
	return agentinstallv1.ClassificationLabelPrefix + c.Spec.LabelKey
}

// QueryErrorValue is the label value of an Agent the query of a
// classification valued value failed on.
func QueryErrorValue(value string) string { return queryErrorPrefix + "-" + value }

// Inventory is an Agent's status.inventory as queries see it: the JSON of
// the Agent's CR (camelCase keys, empty fields left out), decoded into
// gojq's values. Upstream marshals the same struct, with or without an
// inventory reported yet.
func Inventory(inv *agentinstallv1.HardwareInventory) (any, error) {
	data, err := json.Marshal(inv)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// Match runs query on inventory (a value of Inventory). It is true when the
// query yields exactly one value, true; false when that one value is
// anything else (false, null, a number...); an error when the query does not
// parse, fails, runs longer than queryTimeout, or yields no value or more
// than one.
func Match(ctx context.Context, query string, inventory any) (bool, error) {
	q, err := gojq.Parse(query)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	iter := q.RunWithContext(ctx, inventory)
	var values []any
	for len(values) < 2 {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := v.(error); isErr {
			return false, err
		}
		values = append(values, v)
	}
	switch len(values) {
	case 0:
		return false, errNoValue
	case 1:
		b, isBool := values[0].(bool)
		return isBool && b, nil
	}
	return false, errMultipleValues
}

// Classify sets the labels of an Agent whose inventory is inventory (a
// value of Inventory) as the classifications of its namespace say, and
// tells whether it changed them. For each classification in name order: a
// match sets the label to labelValue, a failure to QUERYERROR-labelValue;
// no match, or the classification being deleted, removes the label if it
// holds either of those values (another classification's value under the
// same key stays).
func Classify(ctx context.Context, labels map[string]string, classifications []agentinstallv1.AgentClassification, inventory any) bool {
	sorted := append([]agentinstallv1.AgentClassification(nil), classifications...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	changed := false
	for i := range sorted {
		c := &sorted[i]
		key, value := LabelKey(c), c.Spec.LabelValue
		if !c.DeletionTimestamp.IsZero() {
			changed = removeLabel(labels, key, value) || changed
			continue
		}
		matched, err := Match(ctx, c.Spec.Query, inventory)
		switch {
		case err != nil:
			changed = setLabel(labels, key, QueryErrorValue(value)) || changed
		case matched:
			changed = setLabel(labels, key, value) || changed
		default:
			changed = removeLabel(labels, key, value) || changed
		}
	}
	return changed
}

func setLabel(labels map[string]string, key, value string) bool {
	if old, ok := labels[key]; ok && old == value {
		return false
	}
	labels[key] = value
	return true
}

// removeLabel removes the label key if a classification valued value set
// it (matched or failed).
func removeLabel(labels map[string]string, key, value string) bool {
	old, ok := labels[key]
	if !ok || (old != value && old != QueryErrorValue(value)) {
		return false
	}
	delete(labels, key)
	return true
}

// Count counts the Agents labelled by a classification: matched carry its
// label with its value, failed a QUERYERROR value under its key (upstream
// counts any such value, whichever classification of the key set it).
func Count(agents []agentinstallv1.Agent, c *agentinstallv1.AgentClassification) (matched, failed int) {
	key := LabelKey(c)
	for i := range agents {
		v, ok := agents[i].Labels[key]
		switch {
		case !ok:
		case v == c.Spec.LabelValue:
			matched++
		case strings.HasPrefix(v, queryErrorPrefix):
			failed++
		}
	}
	return matched, failed
}
